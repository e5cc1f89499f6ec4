"""official_bert's fine-tuning step equals Hugging Face transformers' step for step.

The case (tests/trajectory_case.py) leaves nothing random: the real
all-MiniLM-L6-v2 weights, dropout 0, the same head initialization and batches.
The expected losses were recorded with transformers 5.18 on PyTorch 2.14 by
tests/reference/hf_trajectory.py (see its docstring for the command). Equal
losses over 12 updates check the whole training path at once: encoder forward
and backward, the token-level loss, global-norm clipping, the AdamW update
(epsilon on the bias-corrected second moment, decoupled weight decay, biases
and LayerNorm excluded) and the warm-up/decay schedule.
"""

import numpy as np
import pytest

import trajectory_case as case

# tests/reference/hf_trajectory.py, transformers 5.18.0, torch 2.14.1, CPU float32.
TRANSFORMERS_LOSSES = [1.893173, 1.960726, 1.853652, 1.641667, 1.427147, 1.346729,
                       1.151722, 1.110010, 1.001768, 0.967295, 0.980450, 0.912686]


@pytest.mark.parametrize("jit_compile", [False, True], ids=["eager", "xla"])
def test_ner_fine_tuning_matches_transformers(minilm_dir, tmp_path, jit_compile):
    import tensorflow as tf

    import run_ner
    from official_bert import runner

    files = runner.resolve_model_files(init_checkpoint=str(minilm_dir), bert_config_file=None,
                                       vocab_file=None, do_lower_case=None)
    config = files.config
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    task = run_ner.NerTask(config, len(case.LABELS))
    settings = runner.RunSettings(output_dir=str(tmp_path), learning_rate=case.LEARNING_RATE,
                                  jit_compile=jit_compile, log_steps=1)
    trainer = runner.make_trainer(task, settings, case.NUM_STEPS, case.WARMUP_STEPS,
                                  runner.encoder_init_fn(files.checkpoint), train=True)
    trainer.model.token_classifier.kernel.assign(case.head_kernel(config.hidden_size))

    data = case.arrays(files.vocab_file)
    ordered = {k: v[case.batch_order().reshape(-1)] for k, v in data.items()}

    def dataset_fn(context):
        return tf.data.Dataset.from_tensor_slices(ordered).batch(case.BATCH_SIZE)

    iterator = trainer.train_iterator(dataset_fn)
    losses = [trainer.run_train_steps(iterator, 1) for _ in range(case.NUM_STEPS)]
    np.testing.assert_allclose(losses, TRANSFORMERS_LOSSES, rtol=2e-5, atol=2e-6)
    # And the schedule ended where transformers' does: at 0.
    assert trainer.current_learning_rate() == 0.0

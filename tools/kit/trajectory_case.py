"""A fixed fine-tuning case run by both official_bert and Hugging Face transformers.

all-MiniLM-L6-v2 fine-tuned for tagging on 24 hand-made sentences, dropout off,
with BERT's recipe (AdamW, weight decay 0.01 except biases and LayerNorm,
epsilon 1e-6, warm-up then linear decay, global-norm clipping 1.0), the same
head initialization and the same batches in the same order. With nothing random
left, the two frameworks must give the same loss at every step:
`tests/test_finetuning_trajectory.py` checks official_bert's `Trainer` against
the losses that `tools/parity/hf_trajectory.py` recorded with transformers.

Pure Python and numpy (no TensorFlow), so the reference script can import it.
"""

import numpy as np

from data_prep import conll
from official_bert.text import tokenization

LABELS = ["O", "B-person", "I-person", "B-location", "I-location", "B-org", "I-org"]

_SENTENCES = """\
John Smith lives in New York .|B-person I-person O O B-location I-location O
Mary went to Paris with Apple engineers .|B-person O O B-location O B-org O O
The Red Cross opened an office in Nairobi .|O B-org I-org O O O O B-location O
Angela Merkel met Emmanuel Macron in Berlin yesterday .|B-person I-person O B-person I-person O B-location O O
I love the weather in San Francisco !|O O O O O B-location I-location O
Google and Microsoft compete in Seattle .|B-org O B-org O O B-location O
lol @ the game last night , go Ravens|O O O O O O O O B-org
Barack Obama spoke at Harvard University on Monday .|B-person I-person O O B-org I-org O O O
We drove from Lake Tahoe to Reno overnight|O O O B-location I-location O B-location O
Taylor Swift's new album is out|B-person I-person O O O O
the United Nations met in Geneva|O B-org I-org O O B-location
can't wait for Christmas in Rome with Luca|O O O O O B-location O B-person
Mount Everest is in Nepal .|B-location I-location O O B-location O
Serena Williams won again at Wimbledon|B-person I-person O O O B-location
Amazon opened a warehouse near Dallas .|B-org O O O O B-location O
Dr. Jane Goodall visited Tanzania in 1960 .|O B-person I-person O B-location O O O
my cousin works for Tesla in Austin|O O O O B-org O B-location
Lionel Messi moved to Miami .|B-person I-person O O B-location O
The Rolling Stones played Hyde Park|O B-org I-org O B-location I-location
nobody here knows what happened|O O O O O
Rio de Janeiro hosted the Olympics|B-location I-location I-location O O O
Elon Musk tweeted about SpaceX again|B-person I-person O O B-org O
we met Ana and Pedro at the Louvre|O O B-person O B-person O O B-location
Stanford University is near Palo Alto .|B-org I-org O O B-location I-location O"""

MAX_SEQ_LENGTH = 32
BATCH_SIZE = 8
NUM_STEPS = 12
WARMUP_STEPS = 2
LEARNING_RATE = 1e-4


def sentences():
    """[(words, tags)] of the case."""
    out = []
    for line in _SENTENCES.splitlines():
        text, tags = line.split("|")
        words, tags = text.split(), tags.split()
        assert len(words) == len(tags), line
        out.append((words, tags))
    return out


def arrays(vocab_file):
    """run_ner's packed windows of the case: input_word_ids, input_mask,
    input_type_ids, label_ids (-1 where not labelled), [24, 32] int32."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    windows = conll.convert_sentences(
        [conll.Sentence(words, tags, columns=[], line_numbers=[]) for words, tags in sentences()],
        tokenizer, LABELS, MAX_SEQ_LENGTH)
    assert len(windows) == len(sentences())
    return conll.windows_to_arrays(windows)


def span_positions(label_ids):
    """The span case's targets: each sentence's first entity, from its first
    sub-token to the last sub-token before the next word outside it;
    (0, 0) = [CLS] for a sentence without one (SQuAD's "no answer")."""
    starts, ends = [], []
    for row in label_ids:
        start = end = 0
        for position, label in enumerate(row):
            if start == 0 and label >= 0 and LABELS[label].startswith("B-"):
                start = end = position
            elif start and (label < 0 or LABELS[label].startswith("I-")):
                if row[position + 1:].max() < 0 and label < 0:
                    break  # [SEP] and padding
                end = position
            elif start:
                break
        starts.append(start)
        ends.append(end)
    return np.asarray(starts, np.int32), np.asarray(ends, np.int32)


def head_kernel(hidden_size, num_outputs=len(LABELS)):
    """A head's initial kernel [hidden, num_outputs] (bias 0): the token
    classifier's, or (num_outputs=2) the span head's start and end vectors."""
    rng = np.random.RandomState(0)
    return (rng.standard_normal((hidden_size, num_outputs)) * 0.02).astype(np.float32)


def batch_order():
    """Example indices of each step's batch, [NUM_STEPS, BATCH_SIZE]."""
    rng = np.random.RandomState(1)
    n = len(sentences())
    epochs = -(-NUM_STEPS * BATCH_SIZE // n)
    flat = np.concatenate([rng.permutation(n) for _ in range(epochs)])
    return flat[:NUM_STEPS * BATCH_SIZE].reshape(NUM_STEPS, BATCH_SIZE)

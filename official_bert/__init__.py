"""official_bert: BERT (Devlin et al., 2018) in TensorFlow 2 / Keras 3.

The public surface, importable from the package itself:

    import official_bert as ob

    encoder, checkpoint = ob.load_encoder("path/to/all-MiniLM-L6-v2")  # any checkpoint kind
    tokenizer = ob.FullTokenizer(checkpoint.vocab_file, do_lower_case=True)
    classifier = ob.BertClassifier(encoder, num_classes=2)

| name | what it is |
|---|---|
| `BertConfig` | the model's shape: reads bert_config.json / config.json |
| `BertEncoder` | the Transformer encoder (a Keras model: ids in, vectors out) |
| `BertPretrainer`, `BertClassifier`, `BertMultipleChoice`, `BertSpanLabeler`, `BertTokenClassifier` | the heads around an encoder |
| `FullTokenizer` | google-research/bert's tokenizer (Python) |
| `BertPreprocessor` | the in-graph tokenizer and packer (raw strings in a SavedModel) |
| `read_checkpoint`, `load_encoder` | any checkpoint: Hugging Face, Google TF1, this project's runs |
| `export_huggingface`, `export_google` | write an encoder as a Hugging Face directory or google's TF1 files |

Each name is loaded on first use, so `import official_bert` (and every
command's `--help`) does not load TensorFlow.
"""

import importlib

# Public name -> the module that defines it.
_PUBLIC = {
    "BertConfig": "official_bert.modeling.configs",
    "BertEncoder": "official_bert.modeling.encoder",
    "BertPretrainer": "official_bert.modeling.heads",
    "BertClassifier": "official_bert.modeling.heads",
    "BertMultipleChoice": "official_bert.modeling.heads",
    "BertSpanLabeler": "official_bert.modeling.heads",
    "BertTokenClassifier": "official_bert.modeling.heads",
    "FullTokenizer": "official_bert.text.tokenization",
    "BertPreprocessor": "official_bert.text.text_layers",
    "read_checkpoint": "official_bert.checkpoints",
    "load_encoder": "official_bert.checkpoints",
    "export_huggingface": "official_bert.checkpoints",
    "export_google": "official_bert.checkpoints",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'official_bert' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(list(globals()) + __all__)

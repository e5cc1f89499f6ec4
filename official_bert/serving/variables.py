"""What every serving form shares below the export itself: the id inputs'
names, and the variables a SavedModel or TFLite converter must see
(`track_captured_variables`). Its own module so that `serving.base` (the
SavedModel) and `serving.edge` (TFLite, ONNX) both build on it without
importing each other."""

from __future__ import annotations

import keras
import tensorflow as tf

IDS_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def track_captured_variables(module, layers=()) -> list:
    """Makes the `tf.Variable`s of Keras models checkpointed objects of `module`.

    A Keras 3 variable wraps a `tf.Variable`; `tf.saved_model.save` writes
    the wrapper as a fresh variable (`Variable_N`) while the traced functions
    read the wrapped one. TF2's `tf.saved_model.load` connects the two, but a
    TF1 session loader, which is what TF Serving and `saved_model_cli run`
    use, restores only checkpointed objects and then fails with "Could not
    find variable ...". Tracking the wrapped variables themselves (as
    `keras.export.ExportArchive` does) makes the session restore them too
    (the TFLite converter needs the same). The models are `layers` and the
    Keras layers among `module`'s attributes. Returns the variables.
    """
    seen, captured = set(), []
    candidates = list(layers) + list(vars(module).values())
    for value in candidates:
        if isinstance(value, keras.layers.Layer):
            for variable in value.variables:
                inner = variable.value if isinstance(variable, keras.Variable) else variable
                if isinstance(inner, tf.Variable) and id(inner) not in seen:
                    seen.add(id(inner))
                    captured.append(inner)
    module._serving_variables = captured
    return captured

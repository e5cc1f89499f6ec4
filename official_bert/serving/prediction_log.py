"""TF Serving's warm-up records (`tensorflow.serving.PredictionLog` holding a
`PredictRequest`), encoded and decoded without `tensorflow-serving-api`.

Every export carries `assets.extra/tf_serving_warmup_requests`; the package
that defines these protos is not a core dependency (it pins its own
TensorFlow), so the few fields a warm-up record uses are written and read here
in the protobuf wire format. The tensors themselves are TensorFlow's own
`TensorProto` (`tf.make_tensor_proto` / `tf.make_ndarray`). The field numbers,
from tensorflow_serving/apis/{prediction_log,predict,model}.proto (checked
against `tensorflow-serving-api==2.21.0`, and byte for byte in
tests/test_serving.py):

    PredictionLog   predict_log = 6 (PredictLog)
    PredictLog      request = 1 (PredictRequest)
    PredictRequest  model_spec = 1 (ModelSpec); inputs = 2 (map<string, TensorProto>:
                    repeated entries, key = 1, value = 2)
    ModelSpec       name = 1; signature_name = 3

Encoding follows the official serializer with `deterministic=True`: fields in
number order, empty strings left out (proto3), map entries sorted by key. The
decoder skips fields it does not use, as protobuf parsers do.
"""

from __future__ import annotations

import tensorflow as tf
from google.protobuf.message import DecodeError as ProtobufDecodeError
from tensorflow.core.framework import tensor_pb2

from data_prep.tfrecord_io import varint

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5

PREDICTION_LOG_PREDICT_LOG = 6
PREDICT_LOG_REQUEST = 1
REQUEST_MODEL_SPEC, REQUEST_INPUTS = 1, 2
MAP_KEY, MAP_VALUE = 1, 2
MODEL_SPEC_NAME, MODEL_SPEC_SIGNATURE_NAME = 1, 3


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited field: tag, length, payload."""
    return varint(number << 3 | _LENGTH_DELIMITED) + varint(len(payload)) + payload


def encode(signature_name: str, inputs: dict, model_name: str = "") -> bytes:
    """The serialized PredictionLog{predict_log{request{model_spec{name,
    signature_name}, inputs}}} of one request; `inputs` maps names to numpy
    arrays (or anything `tf.make_tensor_proto` takes)."""
    spec = b"".join(_field(number, text.encode("utf-8")) for number, text in
                    ((MODEL_SPEC_NAME, model_name), (MODEL_SPEC_SIGNATURE_NAME, signature_name))
                    if text)
    entries = [_field(REQUEST_INPUTS, _field(MAP_KEY, name.encode("utf-8")) +
                      _field(MAP_VALUE, tf.make_tensor_proto(inputs[name]).SerializeToString()))
               for name in sorted(inputs)]
    request = _field(REQUEST_MODEL_SPEC, spec) + b"".join(entries)
    return _field(PREDICTION_LOG_PREDICT_LOG, _field(PREDICT_LOG_REQUEST, request))


class DecodeError(ValueError):
    """The bytes are not a PredictionLog holding a PredictRequest."""


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data):
            raise DecodeError("a varint runs past the end of the message")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift >= 70:
            raise DecodeError("a varint is longer than 10 bytes")


def _fields(data: bytes):
    """(field number, payload) of each length-delimited field of one message;
    fields of the other wire types are skipped."""
    position = 0
    while position < len(data):
        tag, position = _read_varint(data, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == _VARINT:
            _, position = _read_varint(data, position)
        elif wire_type in (_FIXED64, _FIXED32):
            position += 8 if wire_type == _FIXED64 else 4
        elif wire_type == _LENGTH_DELIMITED:
            length, position = _read_varint(data, position)
            if position + length > len(data):
                raise DecodeError(f"field {number} runs past the end of the message")
            yield number, data[position:position + length]
            position += length
        else:
            raise DecodeError(f"field {number} has the unknown wire type {wire_type}")
        if position > len(data):
            raise DecodeError("a fixed-width field runs past the end of the message")


def _last(data: bytes, number: int) -> bytes | None:
    """The field's payload (the last one wins, as for a protobuf singular field)."""
    found = None
    for field, payload in _fields(data):
        if field == number:
            found = payload
    return found


def decode(record: bytes) -> tuple[str, str, dict]:
    """(model name, signature name, {input name: numpy array}) of one
    serialized PredictionLog; `DecodeError` if it holds no PredictRequest."""
    log = _last(record, PREDICTION_LOG_PREDICT_LOG)
    request = None if log is None else _last(log, PREDICT_LOG_REQUEST)
    if request is None:
        raise DecodeError("it is not a PredictionLog with a predict_log request")
    spec = _last(request, REQUEST_MODEL_SPEC) or b""
    try:
        names = {number: payload.decode("utf-8") for number, payload in _fields(spec)
                 if number in (MODEL_SPEC_NAME, MODEL_SPEC_SIGNATURE_NAME)}
        inputs = {}
        for number, entry in _fields(request):
            if number == REQUEST_INPUTS:
                key = (_last(entry, MAP_KEY) or b"").decode("utf-8")
                tensor = tensor_pb2.TensorProto.FromString(_last(entry, MAP_VALUE) or b"")
                inputs[key] = tf.make_ndarray(tensor)
    except (UnicodeDecodeError, ProtobufDecodeError) as e:
        raise DecodeError(f"it holds a malformed request ({e})") from None
    return (names.get(MODEL_SPEC_NAME, ""), names.get(MODEL_SPEC_SIGNATURE_NAME, ""), inputs)

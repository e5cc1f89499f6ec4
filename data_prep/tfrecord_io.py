"""Writing `tf.train.Example` TFRecords without TensorFlow, fast and atomically.

Data generation runs in worker processes that must start in a fraction of a
second, so this module does not import TensorFlow (its import alone takes
seconds). It provides:

* `ExampleEncoder`: hand-serialises `tf.train.Example` protos whose features
  are int64 and float lists. The bytes are the protobuf wire format
  (`Example.features` = field 1; `Features.feature` = map<string, Feature>
  entries with key = field 1, value = field 2; `Feature.float_list` = field 2,
  `Feature.int64_list` = field 3; the lists' `value` = field 1, packed).
  Varints of token ids are precomputed, so one example is a few `bytes.join`s.
* `masked_crc32c`: TFRecord's masked CRC-32C (Castagnoli) of a record, by
  Google's C implementation (`google-crc32c`, hardware CRC instructions where
  the CPU has them).
* `TFRecordWriter`: TFRecord framing (`uint64 length, uint32 masked_crc(length),
  data, uint32 masked_crc(data)`), optional gzip (TensorFlow's
  `compression_type="GZIP"` reads it, also several gzip members one after the
  other), written under `official_bert.io`'s hidden temporary name
  (`.<name>.tmp-<pid>-<hex>`, created with O_EXCL) and renamed only by
  `commit()`: a file with the final name is always complete. Local files are
  written with plain buffered `os` writes (fast); other paths (`gs://`,
  `ram://`) through `tf.io.gfile`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import zlib

import google_crc32c

from official_bert import io

_MASK_DELTA = 0xA282EAD8
_pack_u64 = struct.Struct("<Q").pack  # a record's length
_pack_u32 = struct.Struct("<I").pack  # a masked CRC

crc32c = google_crc32c.value  # bytes -> CRC-32C as an int


def masked_crc32c(data: bytes) -> bytes:
    """TFRecord's masked CRC-32C of `data`, packed as a little-endian uint32.

    Masked because a CRC of data that itself holds CRCs is weak: TensorFlow's
    `crc32c::Mask` rotates it right by 15 bits and adds a constant.
    """
    crc = crc32c(data)
    return _pack_u32((((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


# --------------------------------------------------------------------------
# tf.train.Example encoding
# --------------------------------------------------------------------------


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, 10 bytes
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _len_prefixed(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def int64_feature(packed_varints: bytes) -> bytes:
    """Feature{int64_list{value: packed}} from already varint-encoded values."""
    return _len_prefixed(b"\x1a", _len_prefixed(b"\x0a", packed_varints))


def float_feature(packed_floats: bytes) -> bytes:
    """Feature{float_list{value: packed}} from little-endian float32 bytes."""
    return _len_prefixed(b"\x12", _len_prefixed(b"\x0a", packed_floats))


def feature_entry(key: str, feature: bytes) -> bytes:
    """One Features.feature map entry (key → Feature)."""
    entry = _len_prefixed(b"\x0a", key.encode("utf-8")) + _len_prefixed(b"\x12", feature)
    return _len_prefixed(b"\x0a", entry)


def example(entries: list[bytes]) -> bytes:
    """Example{features{feature: entries}} from `feature_entry` outputs."""
    return _len_prefixed(b"\x0a", b"".join(entries))


def encode_example(features: dict) -> bytes:
    """Generic (slower) encoder: {name: list of int | list of float} → Example bytes."""
    entries = []
    for key, values in features.items():
        values = list(values)
        if values and isinstance(values[0], float):
            entries.append(feature_entry(key, float_feature(struct.pack(f"<{len(values)}f", *values))))
        else:
            entries.append(feature_entry(key, int64_feature(b"".join(varint(int(v)) for v in values))))
    return example(entries)


# --------------------------------------------------------------------------
# TFRecord files
# --------------------------------------------------------------------------


class TFRecordWriter:
    """Buffered TFRecord writer to a temporary name; `commit()` renames it into place.

    `close()` without `commit()` (or an exception inside a `with` block)
    deletes the temporary file.

    Args:
        path: the final file.
        tmp_path: where to write until `commit()`; by default
            `io.temporary_name(path)` (given when another process renames it).
    """

    def __init__(self, path: str, gzip: bool = False, buffer_records: int = 512,
                 compresslevel: int = 6, tmp_path: str | None = None):
        self.path = os.fspath(path)
        self.tmp_path = tmp_path or io.temporary_name(self.path)
        io.check_output_directory(self.path)
        try:
            self._file = io.open_new(self.tmp_path, "wb")
        except OSError as e:
            from official_bert.errors import UserError, is_disk_full

            if is_disk_full(e):
                io.reraise_disk_full(e, self.path)
            raise UserError(f"cannot write output {path}: {e.strerror}") from None
        self._compressor = zlib.compressobj(compresslevel, zlib.DEFLATED, 31) if gzip else None
        self._buffer: list[bytes] = []
        self._buffer_records = buffer_records
        self.records = 0
        self.bytes = 0
        self.committed = False

    def write(self, record: bytes) -> None:
        self._buffer.append(record)
        if len(self._buffer) >= self._buffer_records:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        records = self._buffer
        self._buffer = []
        headers = list(map(_pack_u64, map(len, records)))
        n = len(records)
        # Each record framed as length, its CRC, data, its CRC: one join, no Python loop.
        blob = b"".join(itertools.chain.from_iterable(zip(
            headers, map(masked_crc32c, headers), records, map(masked_crc32c, records))))
        if self._compressor is not None:
            blob = self._compressor.compress(blob)
        self._write(blob)
        self.records += n
        self.bytes += len(blob)

    def _write(self, blob: bytes) -> None:
        try:
            self._file.write(blob)
        except OSError as e:
            self.close()
            io.reraise_disk_full(e, self.path)

    def _finish(self) -> None:
        self.flush()
        if self._compressor is not None:
            self._write(self._compressor.flush())
            self._compressor = None
        try:
            io.sync(self._file)
            self._file.close()
        except OSError as e:
            self.close()
            io.reraise_disk_full(e, self.path)

    def commit(self, rename: bool = True) -> None:
        """Finishes the file; renames it to its final name unless `rename=False`."""
        self._finish()
        if rename:
            io.publish_file(self.tmp_path, self.path, overwrite=True)
        self.committed = True

    def close(self) -> None:
        """Abandons an uncommitted file (deletes the temporary)."""
        if self.committed:
            return
        try:
            with contextlib.suppress(OSError):  # e.g. a full disk: the file is dropped anyway
                self._file.close()
        finally:
            io.remove(self.tmp_path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and not self.committed:
            self.commit()
        self.close()

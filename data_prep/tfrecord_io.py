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
* `crc32c_batch`: masked CRC-32C (Castagnoli) checksums of many records at once
  with numpy. The CRC register update is linear over GF(2), so the CRC of a
  message is `~(I[n] ^ XOR_i P[n-1-i][byte_i])` with precomputed tables `P`
  (the effect of byte b at distance k from the end) and `I` (the effect of the
  initial all-ones register after n bytes): one gather and one `xor.reduceat`
  per batch, computed in work arrays kept between batches (fresh megabyte
  temporaries per batch cost more in page faults than the arithmetic).
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
import threading
import zlib

import numpy as np

from official_bert import io

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8
_pack_u64 = struct.Struct("<Q").pack  # a record's length
_pack_u32 = struct.Struct("<I").pack  # a masked CRC


def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for b in range(256):
        crc = b
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        table[b] = crc
    return table


_TABLE = _crc_table()
_TABLE_LIST = [int(x) for x in _TABLE]


class _Crc32cTables:
    def __init__(self):
        self.length = 0
        self.p = np.zeros((0, 256), dtype=np.uint32)  # p[k, b]
        self.init = np.array([0xFFFFFFFF], dtype=np.uint32)  # init[n]
        self._work_size = 0
        self.lock = threading.Lock()
        self.extend(1024)  # grown (doubling) as longer messages come: built at start-up

    def extend(self, length: int) -> None:
        if length <= self.length:
            return
        length = max(length, 2 * self.length)
        p = np.empty((length, 256), dtype=np.uint32)
        p[: self.length] = self.p
        row = _TABLE.copy() if self.length == 0 else self.p[self.length - 1]
        start = 0 if self.length == 0 else self.length
        if self.length == 0:
            p[0] = row
            start = 1
        for k in range(start, length):
            row = (row >> np.uint32(8)) ^ _TABLE[row & np.uint32(0xFF)]
            p[k] = row
        init = np.empty(length + 1, dtype=np.uint32)
        init[: len(self.init)] = self.init
        value = self.init[-1]
        for n in range(len(self.init), length + 1):
            value = (value >> np.uint32(8)) ^ _TABLE[value & np.uint32(0xFF)]
            init[n] = value
        self.p, self.init, self.length = p, init, length
        self.p_flat = p.reshape(-1)

    def work(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`crc32c_batch`'s arrays for `size` bytes: index and contribution
        buffers (reused, grown as needed) and 256 * position."""
        if self._work_size < size:
            self._work_size = max(size, 2 * self._work_size)
            self._index = np.empty(self._work_size, dtype=np.intp)
            self._contrib = np.empty(self._work_size, dtype=np.uint32)
            self._down = np.arange(self._work_size, dtype=np.intp) * 256
        return self._index[:size], self._contrib[:size], self._down[:size]


_TABLES = None


def _tables() -> _Crc32cTables:
    global _TABLES
    if _TABLES is None:
        _TABLES = _Crc32cTables()
    return _TABLES


def crc32c(data: bytes) -> int:
    """Plain CRC-32C of one message (reference implementation, slow)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE_LIST[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def crc32c_batch(messages: list[bytes]) -> np.ndarray:
    """CRC-32C of every message (none empty), as uint32, vectorised."""
    tables = _tables()
    lengths = np.fromiter(map(len, messages), dtype=np.intp, count=len(messages))
    if lengths.size == 0:
        return np.zeros(0, dtype=np.uint32)
    if lengths.min() == 0:
        raise ValueError("empty message")
    data = np.frombuffer(b"".join(messages), dtype=np.uint8)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    steps = lengths * 256
    steps[0] -= 256
    with tables.lock:  # one batch at a time in the shared tables and work arrays
        tables.extend(int(lengths.max()))
        index, contrib, down = tables.work(data.size)
        # index = 256 * (distance of the byte from the end of its message) + byte:
        # 256 * (last position of the message) as a cumulative sum of steps at
        # the message starts, minus 256 * position, plus the byte.
        index.fill(0)
        index[starts] = steps
        np.cumsum(index, out=index)
        np.subtract(index, down, out=index)
        np.add(index, data, out=index)
        np.take(tables.p_flat, index, out=contrib)
        reduced = np.bitwise_xor.reduceat(contrib, starts)
    return ~(tables.init[lengths] ^ reduced)


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
        crcs = list(map(_pack_u32, masked(crc32c_batch(headers + records)).tolist()))
        # Each record framed as length, its CRC, data, its CRC: one join, no Python loop.
        blob = b"".join(itertools.chain.from_iterable(
            zip(headers, crcs[:n], records, crcs[n:])))
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
            io.rename(self.tmp_path, self.path, overwrite=True)
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

#!/usr/bin/env python3
"""Writes tests/fixtures/all_dtypes/: a safetensors file with one tensor of every safetensors
dtype weft reads, and what independent decoders make of each tensor as f32 .npy files.

The file is written by the `safetensors` package (torch tensors, so the float8 types and the
unsigned types are available). FP4 (E2M1) has no torch or numpy element type the package can
save, so its packed bytes are saved as a U8 tensor and the header entry is rewritten to
dtype "F4" with the element count (two per byte, low nibble first).

Expected values come from numpy casts (F64, F32, F16, integers, BOOL), torch casts (BF16,
float8) and the E2M1 table below (F4) -- never from weft. Floats include NaNs with payloads,
signalling NaNs, +-inf, -0, subnormals and values that round; integers include the extremes and
round-to-even ties.

Run with the reference venv (torch, numpy, safetensors):
    /work/.venv-ref/bin/python scripts/make_all_dtypes.py
"""

import json
import struct
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save

SEED = 20250601
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "all_dtypes"
FILE = "all_dtypes.safetensors"

# FP4 E2M1 magnitudes by the low three bits of a nibble; bit 3 is the sign.
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def bits_as(values, int_dtype, float_dtype):
    return np.array(values, dtype=int_dtype).view(float_dtype)


def with_specials(rng, specials, random, shape):
    """Specials first, random values after, then shuffled so specials land anywhere."""
    n = int(np.prod(shape))
    values = np.concatenate([specials, random[: n - len(specials)]])
    rng.shuffle(values)
    return values.reshape(shape)


def f64_tensor(rng):
    specials = np.concatenate([
        np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -2.2e-308, 1e300, -1e300,
                  3.4028235677973366e38,  # f32 max, exactly representable
                  3.4028235677973366e38 * (1 + 2**-25),  # halfway to 2^128: ties to even -> inf
                  1.401298464324817e-45,  # f32's smallest subnormal
                  7e-46,  # below half of it -> 0
                  1.0000000596046448,  # 1 + 2^-24: a tie, rounds to even (1.0)
                  0.1]),
        bits_as([0x7FF8_0000_DEAD_BEEF, 0xFFF4_0000_0000_0001, 0x7FF0_0000_0000_0001],
                np.uint64, np.float64),  # quiet NaN with payload, two signalling NaNs
    ])
    random = rng.standard_normal(64) * 10.0 ** rng.integers(-40, 40, 64)
    return torch.from_numpy(with_specials(rng, specials, random, (4, 16)))


def f32_tensor(rng):
    specials = bits_as([0x7FC0_0000, 0xFFC0_1234, 0x7F80_0001, 0xFF80_4321,  # quiet and signalling NaNs
                        0x7F80_0000, 0xFF80_0000, 0x8000_0000, 0x0000_0001, 0x807F_FFFF,
                        0x7F7F_FFFF, 0x0080_0000], np.uint32, np.float32)
    random = (rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64)).astype(np.float32)
    return torch.from_numpy(with_specials(rng, specials, random, (64,)))


def f16_tensor(rng):
    specials = np.array([0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE55, 0x8000, 0x0001, 0x83FF, 0x7BFF,
                         0x0400], dtype=np.uint16)
    random = rng.integers(0, 1 << 16, 64, dtype=np.uint16)
    return torch.from_numpy(with_specials(rng, specials, random, (8, 8)).view(np.float16))


def bf16_tensor(rng):
    specials = np.array([0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFAA, 0x8000, 0x0001, 0x807F, 0x7F7F],
                        dtype=np.uint16)
    random = rng.integers(0, 1 << 16, 64, dtype=np.uint16)
    bits = with_specials(rng, specials, random, (2, 4, 8))
    return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)


def every_byte(rng, shape, float8):
    """All 256 bit patterns once each, shuffled: every NaN, subnormal and extreme of the type."""
    bits = rng.permutation(256).astype(np.uint8).reshape(shape)
    return torch.from_numpy(bits).view(float8)


def f4_nibbles(rng):
    """Every nibble twice, then random ones: 64 values in 32 bytes."""
    nibbles = np.concatenate([np.arange(16), np.arange(16), rng.integers(0, 16, 32)]).astype(np.uint8)
    rng.shuffle(nibbles)
    return nibbles.reshape(4, 16)


def int_tensor(rng, dtype, shape, extra=()):
    info = np.iinfo(dtype)
    specials = np.array([info.min, info.max, 0, *extra], dtype=dtype)
    n = int(np.prod(shape))
    random = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    return with_specials(rng, specials, random, shape)


def tensors_and_expected(rng):
    """(torch tensors to save, expected f32 numpy arrays) by tensor name."""
    tensors, expected = {}, {}

    t = f64_tensor(rng)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf and NaNs are the point
        tensors["f64"], expected["f64"] = t, t.numpy().astype(np.float32)
    t = f32_tensor(rng)
    tensors["f32"], expected["f32"] = t, t.numpy().copy()
    t = f16_tensor(rng)
    tensors["f16"], expected["f16"] = t, t.numpy().astype(np.float32)
    t = bf16_tensor(rng)
    tensors["bf16"], expected["bf16"] = t, t.float().numpy()
    t = every_byte(rng, (16, 16), torch.float8_e4m3fn)
    tensors["f8_e4m3"], expected["f8_e4m3"] = t, t.float().numpy()
    t = every_byte(rng, (256,), torch.float8_e5m2)
    tensors["f8_e5m2"], expected["f8_e5m2"] = t, t.float().numpy()

    nibbles = f4_nibbles(rng)
    packed = nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)
    tensors["f4"] = torch.from_numpy(np.ascontiguousarray(packed))
    sign = np.where(nibbles & 8, -1.0, 1.0).astype(np.float32)
    expected["f4"] = sign * np.array(E2M1, dtype=np.float32)[nibbles & 7]

    # Ties: 2^24 + 1 and 2^25 + 2 round to even in f32; 2^53 + 1 and the 64-bit extremes round.
    ints = [
        ("i64", np.int64, (32,), (2**24 + 1, -(2**25 + 2), 2**53 + 1, 2**62 + 2**38)),
        ("i32", np.int32, (4, 8), (2**24 + 1, -(2**24 + 3), 2**25 + 2)),
        ("i16", np.int16, (3, 5), ()),
        ("i8", np.int8, (9,), ()),
        ("u64", np.uint64, (2, 2, 8), (2**63, 2**64 - 2**39, 2**24 + 1)),
        ("u32", np.uint32, (32,), (2**32 - 129, 2**24 + 3)),
        ("u16", np.uint16, (4, 4), ()),
        ("u8", np.uint8, (2, 3), ()),
    ]
    for name, dtype, shape, extra in ints:
        values = int_tensor(rng, dtype, shape, extra)
        tensors[name], expected[name] = torch.from_numpy(values), values.astype(np.float32)

    flags = rng.integers(0, 2, (5, 7)).astype(bool)
    tensors["bool"], expected["bool"] = torch.from_numpy(flags), flags.astype(np.float32)

    # Shapes the .npy writer must get right: a scalar and a tensor without elements.
    tensors["scalar_f32"] = torch.tensor(-1.5, dtype=torch.float32)
    expected["scalar_f32"] = np.array(-1.5, dtype=np.float32)
    tensors["empty_f16"] = torch.zeros((0, 3), dtype=torch.float16)
    expected["empty_f16"] = np.zeros((0, 3), dtype=np.float32)
    return tensors, expected


def retype_f4(data, name, shape):
    """Rewrites one header entry from U8 bytes to F4 elements; the data section is unchanged."""
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    entry = header[name]
    assert entry["dtype"] == "U8"
    entry["dtype"], entry["shape"] = "F4", list(shape)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data section 8-byte aligned, as the writer does
    return struct.pack("<Q", len(text)) + text + data[8 + header_len :], header


def main():
    rng = np.random.default_rng(SEED)
    tensors, expected = tensors_and_expected(rng)
    data = save(tensors, metadata={"generator": "scripts/make_all_dtypes.py", "seed": str(SEED)})
    data, header = retype_f4(data, "f4", expected["f4"].shape)

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / FILE).write_bytes(data)
    manifest = {"file": FILE, "tensors": []}
    for name in sorted(expected):
        entry = header[name]
        values = expected[name]
        assert list(values.shape) == entry["shape"], name
        np.save(OUT / f"{name}.npy", values.astype("<f4"), allow_pickle=False)
        start, end = entry["data_offsets"]
        manifest["tensors"].append(
            {"name": name, "dtype": entry["dtype"], "shape": entry["shape"], "bytes": end - start})
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{OUT / FILE}: {len(data)} bytes, {len(expected)} tensors")


if __name__ == "__main__":
    main()

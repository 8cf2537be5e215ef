#!/bin/bash
# LZW over the file's bytes: dictionary starts with the 256 single bytes and grows by
# one entry per emitted code; codes are counted at their variable bit width (as in
# the classic LZW packers: 9 bits while the table is < 512 entries, etc.).
cd /workspace
cat > /workspace/compress.py <<'PY'
#!/usr/bin/env python3
import json

INPUT = "/workspace/input.txt"
COMPRESSED = "/workspace/compressed.json"
DECOMPRESSED = "/workspace/decompressed.txt"


def compress(data: bytes):
    table = {bytes([i]): i for i in range(256)}
    next_code = 256
    w = b""
    codes = []
    for b in data:
        wc = w + bytes([b])
        if wc in table:
            w = wc
        else:
            codes.append(table[w])
            table[wc] = next_code
            next_code += 1
            w = bytes([b])
    if w:
        codes.append(table[w])
    return codes


def decompress(codes):
    if not codes:
        return b""
    table = {i: bytes([i]) for i in range(256)}
    next_code = 256
    w = table[codes[0]]
    out = [w]
    for code in codes[1:]:
        if code in table:
            entry = table[code]
        elif code == next_code:  # the KwKwK case
            entry = w + w[:1]
        else:
            raise ValueError(f"bad LZW code {code}")
        out.append(entry)
        table[next_code] = w + entry[:1]
        next_code += 1
        w = entry
    return b"".join(out)


def packed_size_bytes(codes):
    """Bytes needed when each code is written with the bit width of the table at the
    time it is emitted (code k is emitted while the table holds 256 + k entries)."""
    bits = 0
    for k in range(len(codes)):
        bits += max(9, (256 + k - 1).bit_length())
    return (bits + 7) // 8


def main():
    with open(INPUT, "rb") as f:
        data = f.read()
    codes = compress(data)
    restored = decompress(codes)
    with open(DECOMPRESSED, "wb") as f:
        f.write(restored)
    assert restored == data, "round trip failed"
    result = {
        "codes": codes,
        "original_size": len(data),
        "compressed_size": packed_size_bytes(codes),
    }
    with open(COMPRESSED, "w") as f:
        json.dump(result, f)
    ratio = 100.0 * (1 - result["compressed_size"] / max(1, len(data)))
    print(f"{len(data)} bytes -> {len(codes)} codes, {result['compressed_size']} bytes ({ratio:.1f}% smaller)")


if __name__ == "__main__":
    main()
PY
python3 /workspace/compress.py

"""MD2 (RFC 1319 test suite), HMAC-MD2 and the integrity answer cudart checks (vector from
../shared/design/CUDART_CONTRACT.md)."""

import hmac

import pytest

from zluda_py.driver.integrity import MD2, answer, hmac_md2


@pytest.mark.parametrize("message, digest", [
    (b"", "8350e5a3e24c153df2275c9f80692773"),
    (b"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"),
    (b"abc", "da853b0d3f88d99b30283a69e6ded6bb"),
    (b"message digest", "ab4f496bfb2a530b219ff33031fe06b0"),
    (b"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"),
    (b"1234567890" * 8, "d5976f79d83d3a0dc9806c3c66f3efd8"),
])
def test_md2_rfc1319_suite(message, digest):
    assert MD2(message).hexdigest() == digest


def test_md2_incremental_update_matches_one_shot():
    h = MD2(b"message ")
    h.update(b"digest")
    assert h.digest() == MD2(b"message digest").digest()


def test_hmac_md2_follows_rfc2104():
    key, msg = b"k" * 20, b"what do ya want for nothing?"
    # RFC 2104 by hand: H((K ^ opad) || H((K ^ ipad) || m)) with the key hashed down to 16 bytes
    k = MD2(key).digest()
    ipad = bytes(b ^ 0x36 for b in k)
    opad = bytes(b ^ 0x5C for b in k)
    expected = MD2(opad + MD2(ipad + msg).digest()).digest()
    assert hmac_md2(key, msg) == expected == hmac.new(key, msg, MD2).digest()


def test_integrity_answer_matches_published_vector():
    uuid = bytes.fromhex("6722CBCFC661F29274D6ED232A32131C")
    out = answer(12020, 0x2B4A, 0x4D08, 0x2B78, 0x7FF8C80717F0, 0x7FF8C825E4B0, 0x7FF8C7DD0AD0, 0x64A365EE,
                 [(uuid, 0, 4, 0)])
    assert int.from_bytes(out, "little") == 0xEAF1313342BFCD84A7C34628F214707A


def test_integrity_constant_answers_for_versions_ending_0_and_1():
    args = (13000, 1, 2, 3, 4, 5, 6, [])
    first = bytes.fromhex("5c67cb031c184133e8d14c1faa83d38e")
    assert answer(args[0], 13000, *args[1:]) == first
    second = answer(args[0], 13001, *args[1:])
    assert second[7] == 24 and second[:7] == first[:7] and second[8:] == first[8:]

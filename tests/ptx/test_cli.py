"""`zluda ptx check FILE...`."""

from __future__ import annotations

from zluda_py.cli import main

from .corpus import HAND_WRITTEN


def test_check_ok_and_errors(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 9.0\n.target sm_80\n.address_size 64\n.entry k()\n{\n\tfrob;\n}\n")
    assert main(["ptx", "check", str(HAND_WRITTEN[0])]) == 0
    assert capsys.readouterr().out == f"{HAND_WRITTEN[0]}: ok\n"
    assert main(["ptx", "check", str(HAND_WRITTEN[0]), str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"{bad}:6:2: error: unknown instruction 'frob'" in captured.err
    assert captured.out == f"{HAND_WRITTEN[0]}: ok\n"

"""AST back to PTX text that ptxas accepts and that parses back to an equal AST."""

from __future__ import annotations

from .ast import (
    Addr, ArgList, Block, Directive, Function, Imm, Initializer, Instruction, Label, Module, Not,
    Operand, PredOut, Reg, Sink, Statement, Sym, Variable, Vec,
)
from .literals import format_float


def format(module: Module) -> str:  # noqa: A001  (the public name of the API)
    """The module as PTX text."""
    out = [f".version {module.version[0]}.{module.version[1]}",
           f".target {', '.join(module.target)}",
           f".address_size {module.address_size}", ""]
    for item in module.items:
        if isinstance(item, Function):
            out.append(function(item))
        elif isinstance(item, Variable):
            out.append(variable(item) + ";")
        else:
            out.append(directive(item))
    out.append("")
    return "\n".join(out)


def function(fn: Function) -> str:
    head = [f".{fn.linkage} " if fn.linkage else "", f".{fn.kind} "]
    if fn.returns:
        head.append("(" + ", ".join(variable(p) for p in fn.returns) + ") ")
    head.append(fn.name)
    if fn.params or fn.kind == "entry":
        head.append("(\n\t" + ",\n\t".join(variable(p) for p in fn.params) + "\n)")
    lines = ["".join(head)]
    lines.extend(directive(d) for d in fn.directives)
    if fn.body is None:
        lines.append(";")
    else:
        lines.append("{")
        body(fn.body, lines, "\t")
        lines.append("}")
    return "\n".join(lines)


def body(stmts: list[Statement], lines: list[str], indent: str) -> None:
    for s in stmts:
        if isinstance(s, Instruction):
            lines.append(indent + instruction(s))
        elif isinstance(s, Label):
            lines.append(f"{s.name}:")
        elif isinstance(s, Variable):
            lines.append(indent + variable(s) + ";")
        elif isinstance(s, Block):
            lines.append(indent + "{")
            body(s.body, lines, indent + "\t")
            lines.append(indent + "}")
        else:
            lines.append(indent + directive(s))


def instruction(insn: Instruction) -> str:
    guard = ""
    if insn.guard is not None:
        guard = f"@{'!' if insn.guard.negated else ''}{insn.guard.reg} "
    name = insn.opcode + "".join("." + m for m in insn.mods)
    if not insn.operands:
        return f"{guard}{name};"
    return f"{guard}{name} {', '.join(operand(o) for o in insn.operands)};"


def operand(op: Operand) -> str:
    t = type(op)
    if t is Reg or t is Sym:
        return op.name
    if t is Imm:
        return immediate(op)
    if t is Addr:
        return address(op)
    if t is Vec:
        return "{" + ", ".join(operand(e) for e in op.elems) + "}"
    if t is Sink:
        return "_"
    if t is Not:
        return "!" + op.operand.name
    if t is PredOut:
        return f"{operand(op.dest)}|{operand(op.pred)}"
    if t is ArgList:
        return "(" + ", ".join(operand(a) for a in op.args) + ")"
    raise TypeError(f"not an operand: {op!r}")


def immediate(imm: Imm) -> str:
    if imm.kind == "int":
        return str(imm.value)
    if imm.kind == "f32":
        return f"0f{imm.value:08X}"
    if imm.kind == "f64":
        return f"0d{imm.value:016X}"
    return format_float(imm.value)


def address(a: Addr) -> str:
    if a.base is None:
        inner = str(a.offset)
    elif a.offset:
        inner = f"{a.base.name}+{a.offset}"  # ptxas reads `[r+-4]` but not `[r-4]`
    else:
        inner = a.base.name
    for e in a.extra:
        inner += ", " + operand(e)
    return f"[{inner}]"


def variable(v: Variable) -> str:
    parts = []
    if v.linkage:
        parts.append("." + v.linkage)
    parts.append("." + v.space)
    if v.managed:
        parts.append(".attribute(.managed)")
    if v.align is not None and v.ptr is None:
        parts.append(f".align {v.align}")
    if v.vector:
        parts.append(f".v{v.vector}")
    parts.append("." + v.type)
    if v.ptr is not None:
        ptr = ".ptr" + (f".{v.ptr.space}" if v.ptr.space else "")
        if v.ptr.align is not None:
            ptr += f".align {v.ptr.align}"
        parts.append(ptr)
        if v.align is not None:
            parts.insert(-2, f".align {v.align}")
    name = v.name
    if v.count is not None:
        name += f"<{v.count}>"
    for d in v.array:
        name += "[]" if d is None else f"[{d}]"
    parts.append(name)
    text = " ".join(parts)
    if v.init is not None:
        text += " = " + initializer(v.init)
    return text


def initializer(init: Initializer) -> str:
    if init.items is not None:
        return "{" + ", ".join(initializer(i) for i in init.items) + "}"
    if isinstance(init.value, Sym):
        text = init.value.name
        if init.offset:
            text += f"{'+' if init.offset > 0 else '-'}{abs(init.offset)}"
        return f"{init.wrapper}({text})" if init.wrapper else text
    return immediate(init.value)


def _arg(a) -> str:
    if isinstance(a, Sym):
        return a.name
    if isinstance(a, str):
        return '"' + a + '"'
    return str(a)


def directive(d: Directive) -> str:
    n = d.name
    if n == "section":
        return f".section {d.args[0].name}\n{{{d.args[1]}}}"
    if n == "loc":
        text = ".loc"
        for a in d.args:
            if isinstance(a, Sym) and a.name in ("function_name", "inlined_at"):
                text += ","
            text += " " + _arg(a)
        return text
    if n == "file":
        return ".file " + " ".join([_arg(d.args[0]), ", ".join(_arg(a) for a in d.args[1:])])
    if n == "callprototype":
        label, rets, params, *rest = d.args
        text = f"{label}: .callprototype "
        if rets:
            text += "(" + ", ".join(variable(v) for v in rets) + ") "
        text += "_ (" + ", ".join(variable(v) for v in params) + ")"
        return text + "".join(" " + a.name for a in rest) + ";"
    if n in ("branchtargets", "calltargets"):
        return f"{d.args[0]}: .{n} " + ", ".join(_arg(a) for a in d.args[1:]) + ";"
    args = ", ".join(_arg(a) for a in d.args)
    semi = ";" if n in ("pragma", "alias") else ""
    return f".{n} {args}{semi}" if args else f".{n}{semi}"

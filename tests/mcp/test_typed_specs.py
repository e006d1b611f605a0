"""A `ToolSpec` is generic over its input and output models: the type checker rejects a spec
whose handler takes another input model (or returns another output model) than it declares."""

from __future__ import annotations

from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
from pydantic import BaseModel

from memhub.mcp.toolkit import ToolSpec
from memhub.services.runtime import Call


class In(BaseModel):
    x: int = 0


class Other(BaseModel):
    y: int = 0


class Out(BaseModel):
    z: int = 0


async def takes_other(call: Call, args: Other) -> Out:
    return Out()


async def returns_other(call: Call, args: In) -> Other:
    return Other()


async def matches(call: Call, args: In) -> Out:
    return Out()


TOOLS = (
    ToolSpec("good", "Fine.", In, Out, matches, read_only=True),
    ToolSpec("bad_input", "Wrong input model.", In, Out, takes_other, read_only=True),
    ToolSpec("bad_output", "Wrong output model.", In, Out, returns_other, read_only=True),
)
reveal_type(TOOLS[0])
"""


def test_mypy_rejects_a_spec_whose_handler_takes_another_model(tmp_path: Path) -> None:
    snippet = tmp_path / "specs.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    out, err, status = api.run(
        [
            "--strict",
            "--follow-imports=silent",
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(snippet),
        ]
    )
    # the snippet's own lines (mypy's cache may name an earlier copy of specs.py)
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if "specs.py:" in line.split(": ", 1)[0]]
    assert status == 1, (out, err)
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 2, lines
    assert 'Argument 5 to "ToolSpec" has incompatible type' in errors[0]
    assert '"Callable[[Call, Other], Coroutine[Any, Any, Out]]"' in errors[0]
    assert 'expected "Callable[[Call, In], Awaitable[Out]]"' in errors[0]
    assert 'expected "Callable[[Call, In], Awaitable[Out]]"' in errors[1] and "Other]]" in errors[1]
    revealed = 'Revealed type is "memhub.mcp.toolkit.ToolSpec[specs.In, specs.Out]"'
    assert any(revealed in line for line in lines)

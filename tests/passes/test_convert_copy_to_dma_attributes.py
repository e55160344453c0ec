"""convert-copy-to-dma reads what assign-addresses attaches (the kernel's
target, each alloc's address, each semaphore's id); a program in the MLIR
form may carry them missing or of the wrong kind, which is the documented
NEEDS_PASS error at the op, not a traceback."""

import pytest

import copyir
from copyir import errors
from copyir.api import apply_passes, pipeline
from copyir.errors import CopyIRError

KERNEL = "copy.kernel @k(%x : !copy.ref<4xf32, hbm>) attributes {{{attributes}}} {{\n{body}}}\n"
ADDRESSED = 'param_addresses = array<i64: 0>, target = "default"'


def _convert(attributes: str, body: str = "") -> CopyIRError:
    module = copyir.parse(KERNEL.format(attributes=attributes, body=body), "t.mlir")
    with pytest.raises(CopyIRError) as caught:
        apply_passes(module, pipeline("convert-copy-to-dma"))
    return caught.value


def _needs(why: str) -> str:
    return errors.NEEDS_PASS.format(
        pass_name="convert-copy-to-dma", before="assign-addresses", why=why
    )


def test_a_kernel_without_a_target_needs_assign_addresses():
    err = _convert("param_addresses = array<i64: 0>")
    assert str(err) == _needs("the kernel has no target")
    assert err.loc is not None and err.loc.line == 1


def test_an_alloc_whose_address_is_not_an_integer_has_none():
    body = '  %a = copy.alloc {address = "x"} : !copy.ref<4xf32, vmem>\n'
    err = _convert(ADDRESSED, body)
    assert str(err) == _needs("an alloc has no address")
    assert err.loc is not None and err.loc.line == 2


def test_a_semaphore_whose_id_is_not_an_integer_has_none():
    body = '  %s = copy.semaphore {sem_id = "x"} : !copy.sem\n'
    err = _convert(ADDRESSED, body)
    assert str(err) == _needs("a semaphore has no id")
    assert err.loc is not None and err.loc.line == 2

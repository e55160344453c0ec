"""The authoring syntax prints the passes' decisions as comments (the
kernel's target and parameter addresses, an alloc's address, a semaphore's
id); an MLIR program may carry those attributes of another kind, which
print as unknown rather than raise."""

import copyir

KERNEL = (
    "copy.kernel @k(%x : !copy.ref<4xf32, hbm>) attributes "
    "{{param_addresses = array<i64: 0>, target = {target}}} {{\n"
    "  %a = copy.alloc {{address = {address}}} : !copy.ref<4xf32, vmem>\n"
    "  %s = copy.semaphore {{sem_id = {sem_id}}} : !copy.sem\n"
    "}}\n"
)


def _cpy(target: str, address: str, sem_id: str) -> str:
    text = KERNEL.format(target=target, address=address, sem_id=sem_id)
    return copyir.to_text(copyir.parse(text, "t.mlir"), "cpy")


def test_the_notes_of_well_formed_attributes():
    text = _cpy('"default"', "512 : i64", "3 : i64")
    assert "# target default: x at hbm+0" in text
    assert "# vmem+512" in text
    assert "# sem 3" in text


def test_attributes_of_another_kind_print_as_unknown():
    text = _cpy("3", '"x"', '"y"')
    assert "# target ?: x at hbm+0" in text
    assert "vmem+" not in text
    assert "# sem" not in text

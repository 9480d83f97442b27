"""The toy card's page content: the facts its page quotes (``{{fact:toy.…}}``), registered by the book from
``FACTS``, and the numbers its pages may type (``CONSTANTS``, none). A card's page module imports
``atlaslib.cards.facts``, never ``atlaslib.pages``."""
from atlaslib.cards.facts import Fact


def _facts(ctx) -> dict:
    """``toy.test_numbers``: how many numbers the first ok run predicted."""
    return {"toy.test_numbers": Fact(len(ctx.ok_cells("toy")[0]["predictions"]))}


FACTS = {"toy": _facts}
CONSTANTS: dict[str, str] = {}

"""The facts the toy card's page quotes (``{{fact:toy.…}}``); no numbers typed by its pages."""
from atlaslib.cards.facts import Fact

FACTS = {"toy": lambda ctx: {"toy.test_numbers": Fact(len(ctx.ok_cells("toy")[0]["predictions"]))}}
CONSTANTS: dict[str, str] = {}

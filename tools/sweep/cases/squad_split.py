"""bert squad-split (official_bert.commands.squad_split): a SQuAD file split by
articles."""

import json

from tools.kit import fault_kit as kit

from ..argv import split
from ..case import Case, at
from ..setups import GEN, text

COMMAND = "squad-split"

THREE = text("squad3.json", json.dumps({"version": "1.1", "data": kit.squad_json()["data"] * 3}))
OUT = ["gen/train.json", "gen/dev.json"]

CASES = [
    Case("good input", split(), setup=(THREE, GEN), control=True),
    Case("--train_output is the input", split(train=at("squad3.json")), setup=(THREE, GEN),
         names=["squad3.json"]),
    Case("--num_train_articles too large", split("--num_train_articles=3"), setup=(THREE, GEN),
         names=["--num_train_articles"], outputs=OUT),
    Case("not JSON", split(), setup=(text("squad3.json", "{"), GEN), names=["squad3.json"],
         outputs=OUT),
]

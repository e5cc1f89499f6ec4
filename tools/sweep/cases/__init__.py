"""The sweep's cases, one module per command (its COMMAND and CASES), in the table's order."""

from __future__ import annotations

import dataclasses

from . import (bert, build_vocab, classify, compare, create_pretraining_data, distill, download,
               embed, export_encoder, export_google, export_ids_only, extend_vocab,
               extract_features, glue_submission, ner, predict, prepare_corpus, pretrain,
               quickstart, squad, squad_split, swag)

MODULES = (prepare_corpus, build_vocab, extend_vocab, create_pretraining_data, pretrain,
           distill, classify, squad, swag, ner, predict, extract_features, embed, export_google,
           squad_split, bert, export_encoder, export_ids_only, glue_submission, compare, download,
           quickstart)


def by_command() -> dict:
    """{command: [Case, ...]}, each case knowing its command."""
    return {module.COMMAND: [dataclasses.replace(case, command=module.COMMAND)
                             for case in module.CASES]
            for module in MODULES}

"""Files on any file system: paths, reading, atomic writes, publishing.

Every file the project reads or writes goes through this package, one module a
concern:

    paths.py       where a path is (local, `gs://`, `ram://` through
                   `tf.io.gfile`), what stands there, opening it, globs
    reading.py     a user's text: one byte-order-mark rule, the line of a byte
                   that is not UTF-8, JSON; a file's content fingerprint
    staging.py     the steps of a safe write: a hidden temporary name, created
                   new with the user's umask, synced, renamed without replacing
    checks.py      before any work: the output can be written, is no input
    plan.py        the output plan: what the output policy found at each output
                   before the work, which publishing follows
    ledger.py      the record of what the project wrote, in each directory
    publishing.py  the one atomic writer (`atomic_output`) and the one
                   publishing step (`publish_file`, `publish_directory`)

Callers use the names below as `io.<name>` (`from official_bert import io`).
Two modules build on this package: `file_sets` (the files of one output
published together with a manifest, and the flag patterns that name data
files: `expand_paths`) and `run_directory.lock` (a run's exclusive use of its
`--output_dir`). The policy that checks outputs before any work is
`official_bert.outputs`; it writes its findings into the plan.
"""


from official_bert.io.checks import check_output_directory, check_writable, refuse_output_over_input
from official_bert.io.ledger import OUTPUT_LEDGER, is_in_ledger, is_published_output
from official_bert.io.paths import (LOOP_WORDS, NAME_MAX, exists, fit_name, gfile, glob,
                                    has_magic, identity, is_local, is_process_local, is_stream,
                                    isdir, isfile, join, kind_of, listdir, local_path, makedirs,
                                    missing, name_too_long, open_file, same_path, size,
                                    walk_files)
from official_bert.io.plan import Claim, OutputPlan, plan_in_force
from official_bert.io.publishing import (atomic_copy, atomic_output, atomic_write, publish_directory,
                                         publish_file, write_through, written_meanwhile)
from official_bert.io.reading import (BOM, BOM_CHAR, content_fingerprint, not_utf8, read_json,
                                      read_text, strip_bom, text_lines)
from official_bert.io.staging import (make_temporary_dir, new_file_mode, open_new, process_alive,
                                      remove, remove_stale_temporaries, remove_tree, rename,
                                      reraise_disk_full, sync, temporary_name)

__all__ = [  # the names callers use as `io.<name>`
    "atomic_copy", "atomic_output", "atomic_write", "BOM", "BOM_CHAR", "check_output_directory",
    "check_writable", "Claim", "content_fingerprint", "exists", "fit_name", "gfile", "glob",
    "has_magic", "identity", "is_in_ledger", "is_local", "is_process_local",
    "is_published_output", "is_stream", "isdir", "isfile", "join", "kind_of", "listdir",
    "local_path", "LOOP_WORDS", "make_temporary_dir", "makedirs", "missing", "NAME_MAX",
    "name_too_long", "new_file_mode", "not_utf8", "open_file", "open_new", "OUTPUT_LEDGER",
    "OutputPlan", "plan_in_force", "process_alive", "publish_directory", "publish_file",
    "read_json", "read_text", "refuse_output_over_input", "remove", "remove_stale_temporaries",
    "remove_tree", "rename", "reraise_disk_full", "same_path", "size", "strip_bom", "sync",
    "temporary_name", "text_lines", "walk_files", "write_through", "written_meanwhile",
]

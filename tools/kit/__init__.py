"""The kit the tests and the tools share: none of it is library code, and none of it is a test.

    fault_kit        a tiny world of every input the project reads, damage, a runner and
                     the outcome of a run (tests/test_faults.py, tools/bad_input_sweep.py)
    processes        commands run as processes from a fork server that has imported
                     TensorFlow once (`processes.run` and `processes.start`)
    serving_exports  one tiny export per task (tests/test_serving.py,
                     tools/serving_examples.py)
    trajectory_case  the fine-tuning case shared by tests/test_finetuning_trajectory.py
                     and tools/parity/hf_trajectory.py

Who imports whom: this package imports only the library (official_bert, data_prep) and
itself; tools/ and benchmarks/ import it as `tools.kit` (with the repository on
sys.path), never `tests`; the tests import it through `tests/support` (`from support
import processes`). Nothing here imports TensorFlow on import.
"""

"""The bad-input sweep (`tools/bad_input_sweep.py`): its cases as data, and how it runs them.

    case.py      Case (one bad input: name, argv, setup, what the error line must name,
                 which outputs must not be left), Ctx (a case's copy of the world) and
                 `at()`, a path in that copy as argv writes it
    argv.py      each command's argv on the world, with keywords for what a case changes
    setups.py    what a case does to its copy before the run, and the follow-ups
                 (rerun after the fault: it must succeed or resume)
    cases/       one module per command: COMMAND and CASES, a list of Case
    shared_cases.py  the cases several commands' tables share (a fault of an input they
                 read alike), written once
    run.py       the world, running one case, the tables
    matrix.py    the cases nobody writes: generated from the command registry (every
                 command x every output fault, signal at each phase, run-record fault),
                 how such a case runs (a signal inside its phase, two writers) and its table

The tiny world and the runner are the fault kit the tests share (`tools/kit/fault_kit.py`,
imported as `tools.kit`: bad_input_sweep.py puts the repository on sys.path).
"""

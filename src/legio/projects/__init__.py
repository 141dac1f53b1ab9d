"""Projects: each centurio's own clone of Caesar's repository, on its own branch, and what
Caesar would merge of it. Every git Legio runs itself goes through ``gitsafe`` (no
config, hook, filter or driver of an agent's choosing, no global config, bounded in time
and output).

Modules:

- ``branchwork``: what merging a branch would bring, read in the project with Legio's
  own git
- ``checkoutput``: a check's output on its way: a bounded log, the count, the tail
- ``checks``: a project's check run in an agent's copy, sandboxed, bounded, recorded
- ``checkwords``: a check's result in one line (cards, `/projects`, the pull request)
- ``copies``: projects (`[projects]`)
- ``gitsafe``: every git command Legio runs itself
- ``overview``: what Caesar sees of the work
- ``publishing``: bringing an agent's branch into the project
- ``turnwork``: what one turn did to an agent's work on a project (a work card's facts)
- ``tally``: the test runner's own count, read from a check's output
- ``undoing``: undo in git: a turn's work kept under a ref of Legio's, the copy rewound
"""

"""The shell reader and the ask rules: what a Bash command line runs, read with tree-
sitter-bash, and the rules Caesar is asked by. A line that cannot be read word by word
is opaque and asks under every rule. An ask rule is a speed bump; the fence is what the
sandbox cannot reach (``legio.fence``).

Modules:

- ``gitwords``: what the shell reader knows of git
- ``reader``: what a Bash command line runs, read with tree-sitter-bash
- ``readonly``: whether a Bash line only reads (what a plan turn's shell may run)
- ``rules``: ask rules in the CLI's syntax, the matcher on `shell.read` (an opaque line
  matches every Bash rule
- ``tree``: tree-sitter-bash nodes read as bash reads them
- ``words``: what the shell reader knows of programs
"""

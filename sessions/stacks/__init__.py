"""Hang autopsy (`ranks stacks`): every rank's Python stack read in its pod, merged STAT-style.

`procs` finds which process is which rank (its own environment, read in the pod), `dumps` parses
what py-spy prints, `tree` merges the stacks into a prefix tree and its groups, `collect` runs it
all through pods/exec, in parallel and bounded, and `render` writes the text and the JSON.
"""

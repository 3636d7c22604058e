"""``hpcflow doctor``: checks on a node, each a pass/warn/fail line with the fix."""

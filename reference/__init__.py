"""shardspec's reference implementation: sharded tensors in direct code, next to spec/.

Each module's docstring lists the spec rules it implements and where they live, under "Rules and
where they live:"; tests/reference/test_rule_map.py holds the lists to spec/ and to the code.
"""

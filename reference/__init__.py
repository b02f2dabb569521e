"""shardspec's reference implementation: sharded tensors in direct code, next to spec/."""

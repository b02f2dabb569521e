"""shardspec's conformance suite: judges an implementation of sharded tensors against spec/."""

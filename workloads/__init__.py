"""The randomized stage: worlds generated from seeds, run on implementations, checked.

This session lands the parts that need no Spark: the world generator, the
runner that turns a world into a trace, and the invariant checks. The Spark
stage, the differential check and the shrinker build on them.
"""

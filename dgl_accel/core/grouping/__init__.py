"""Group-size models (DGL-free): degree statistics, the linear model of Xu et al., a cost model and
the on-device autotuner, over any ``GraphViews``.  This ``__init__`` imports nothing."""

"""Stand-in for the ``ogb`` package (scripts/dgl_examples): DGL's examples import it to load
ogbn-* datasets, which need a download; here ``nodeproppred.DglNodePropPredDataset`` serves a
shared dataset instead (see ``nodeproppred``).  Only put on ``sys.path`` by scripts/dgl_examples."""

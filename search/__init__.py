"""clew.search: tree search over the roles of :mod:`clew.agents`.

* :mod:`~clew.search.tree`: the plain-data tree and its JSON form;
* :mod:`~clew.search.algorithm`: the contract (``SearchAlgorithm.plan -> SearchResult``) and
  the config every algorithm extends; :mod:`~clew.search.nodes`: the node steps all algorithms
  share; :mod:`~clew.search.mcts`, :mod:`~clew.search.frontier`: the algorithms;
  :mod:`~clew.search.registry`: algorithms by name;
* :mod:`~clew.search.agent`: the search agent; :mod:`~clew.search.hooks`: the adapter between
  an episode and the core; :mod:`~clew.search.options`: its typed options;
  :mod:`~clew.search.build`: the ``search`` factory. Presets: ``configs/agents/*.yaml``.
"""

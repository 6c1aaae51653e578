"""``memoised``: an oracle's value computed once per distinct input for the tests of a module that compare with it
(the oracle's jars and scorers run once; each test still runs capeval's side)."""

import pickle


def memoised(compute):
    """``compute``, each distinct input (its arguments' pickled bytes) computed once; the value is shared, not copied."""
    computed = {}

    def once(*args, **kwargs):
        key = pickle.dumps((args, sorted(kwargs.items())))
        if key not in computed:
            computed[key] = compute(*args, **kwargs)
        return computed[key]

    return once

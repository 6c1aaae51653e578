"""Meta-evaluation against human judgments: is metric A really better than metric B? Paired correlation and
accuracy tests, metric clusters, the leaderboard. (System vs system: :mod:`capeval.statistics`.)"""

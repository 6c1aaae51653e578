"""Meta-evaluation: is metric A really better than metric B? Paired significance tests, clusters, leaderboard."""

"""The network layer below sources and channels: the one HTTP client (`http`) and GitHub's
REST API on it (`github`). It knows no source, receiver or storage; they handle its errors."""

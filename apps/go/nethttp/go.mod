module stackrace/apps/go/nethttp

go 1.22

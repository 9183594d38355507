module stackrace.test/h2go

go 1.24

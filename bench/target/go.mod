module stackrace/bench/target

go 1.21

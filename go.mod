module clouddb

go 1.26

module github.com/sluicehq/sluice/bench

go 1.26

replace github.com/sluicehq/sluice => ../

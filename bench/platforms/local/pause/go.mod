module ingress-bench/pause

go 1.22

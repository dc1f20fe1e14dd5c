module github.com/ingress-bench/ingress-bench/xk6

go 1.25.0

require go.k6.io/k6 v1.8.1

"""ingress-bench's results: a run's summary.json assembled, its page, several runs compared.
`python bench/report ...` is the command line (__main__.py); by concern:

  summary.py     summary.json: k6's summary + the client's CPU + the server's counts; distributed segments
  run.py         a run's files (meta.json, summary.json, timeseries.json) as one model
  prometheus.py  fetch: the run's time series from Prometheus' HTTP API
  fmt.py         numbers as the pages print them
  doc.py         a page as blocks -> HTML and Markdown; the page check
  charts.py      the run page's charts (SVG); matplotlib for the rarer pages'
  page.py        render: one run's page
  index.py       index: several runs, the seeds' tables"""

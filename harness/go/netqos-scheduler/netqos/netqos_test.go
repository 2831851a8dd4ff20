package netqos

import "testing"

func TestNodeScoreIsTheTable(t *testing.T) {
	latency := map[string]string{"qos": "latency-sensitive"}
	other := map[string]string{"qos": "batch"}
	cases := []struct {
		name string
		pod  map[string]string
		node map[string]string
		want int64
	}{
		{"latency-sensitive on net=high", latency, map[string]string{"net": "high"}, 100},
		{"latency-sensitive on net=low", latency, map[string]string{"net": "low"}, 0},
		{"latency-sensitive on an unlabelled node", latency, nil, 10},
		{"latency-sensitive on net=medium", latency, map[string]string{"net": "medium"}, 10},
		{"latency-sensitive on net=High (values compare exactly)", latency, map[string]string{"net": "High"}, 10},
		{"another pod on net=high (the original's missing return not reproduced)", other, map[string]string{"net": "high"}, 0},
		{"an unlabelled pod on an unlabelled node", nil, nil, 0},
	}
	for _, c := range cases {
		if got := NodeScore(c.pod, c.node); got != c.want {
			t.Errorf("%s: NodeScore = %d, want %d", c.name, got, c.want)
		}
	}
}

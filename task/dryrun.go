package task

// pricingLine is an element of a dry run's response.resource.pricing, in the form of
// GET /subscriptions/{id}/pricing: one shard per database, at no charge (clouddb is
// self-hosted).
type pricingLine struct {
	DatabaseName        string  `json:"databaseName"`
	Type                string  `json:"type"`
	TypeDetails         string  `json:"typeDetails"`
	Quantity            int     `json:"quantity"`
	QuantityMeasurement string  `json:"quantityMeasurement"`
	PricePerUnit        float64 `json:"pricePerUnit"`
	PriceCurrency       string  `json:"priceCurrency"`
	PricePeriod         string  `json:"pricePeriod"`
}

// dryRunPricing is the resource of a dry run that would create or change the named
// databases.
func dryRunPricing(names ...string) any {
	lines := make([]pricingLine, 0, len(names))
	for _, n := range names {
		lines = append(lines, pricingLine{DatabaseName: n, Type: "Shards", TypeDetails: "standard", Quantity: 1,
			QuantityMeasurement: "shards", PricePerUnit: 0, PriceCurrency: "USD", PricePeriod: "hour"})
	}
	return map[string]any{"pricing": lines}
}

package rowqtype

// Routing sends the jobs of a category to a queue.
type Routing struct {
	JobCategory string `json:"job_category"`
	QueueName   string `json:"queue_name"`
}

// RoutingRequest is the body of PUT /routing/{category}.
type RoutingRequest struct {
	QueueName string `json:"queue_name"` // an existing queue (required)
}

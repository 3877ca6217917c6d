"""Fleet-wide limits: shares of a cap or a rate, leased through one DynamoDB item per limit."""

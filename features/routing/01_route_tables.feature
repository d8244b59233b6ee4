@requires-routing
Feature: Routing 01 - Which route table, and expired routes

  Each database holds sys.routes for the conversations begun in it; for a
  conversation that arrives from outside the instance, SQL Server searches
  msdb.sys.routes. Matching is the same for both, and it ignores expired
  routes. A message goes to a service of this instance only by a LOCAL
  route from the right table.

  Background:
    Given the topology "routing"
    And dialog "D1" is begun from service "Initiator" to service "Target"

  @RTE-01 @RTL-1
  Scenario: [1] A conversation begun in the instance is routed with its database's sys.routes, then with msdb's where it arrives
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | table           | step  | routes           | database |
      | routes matched  | sql1     | shop.sys.routes | RTM-2 | ToOrders         | NULL     |
      | routes matched  | sql2     | msdb.sys.routes | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql2     | NULL            | NULL  | NULL             | orders   |

  @RTE-01
  Scenario: [2] msdb.sys.routes plays no part for a conversation begun in the instance
    Given the routes in msdb of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | table           | database |
      | routes matched  | sql1     | shop.sys.routes | NULL     |
      | message arrived | sql1     | NULL            | shop     |

  @RTE-01 @RTL-1
  Scenario: [3] A message from outside is routed with msdb.sys.routes, not with a database's sys.routes
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And the routes in database "orders" of "sql2" are:
      | name   | service_name | address                 |
      | Away   | Target       | TCP://sql5.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | table           | database |
      | routes matched  | sql1     | shop.sys.routes | NULL     |
      | routes matched  | sql2     | msdb.sys.routes | NULL     |
      | message arrived | sql2     | NULL            | orders   |

  @RTE-02
  Scenario: [4] A route is used while its lifetime lasts
    Given the routes in database "shop" of "sql1" are:
      | name             | service_name | address                 | lifetime_s |
      | ToOrders         | Target       | TCP://sql2.example:4022 | 10         |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 9
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | routes   | database |
      | routes matched  | sql1     | ToOrders | NULL     |
      | routes matched  | sql2     | AutoCreatedLocal | NULL |
      | message arrived | sql2     | NULL     | orders   |

  @RTE-02
  Scenario: [5] An expired route is ignored in a database's sys.routes
    Given the routes in database "shop" of "sql1" are:
      | name             | service_name | address                 | lifetime_s |
      | ToOrders         | Target       | TCP://sql2.example:4022 | 10         |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 11
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | routes           | database |
      | routes matched  | sql1     | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql1     | NULL  | NULL             | shop     |

  @RTE-02
  Scenario: [6] An expired route is ignored in msdb.sys.routes as well
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 |
      | ToOrders | Target       | TCP://sql2.example:4022 |
    And the routes in msdb of "sql2" are:
      | name             | service_name | address                 | lifetime_s |
      | Onwards          | Target       | TCP://sql5.example:4022 | 5          |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 6
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | routes           | database |
      | routes matched  | sql1     | RTM-2 | ToOrders         | NULL     |
      | routes matched  | sql2     | RTM-5 | AutoCreatedLocal | NULL     |
      | message arrived | sql2     | NULL  | NULL             | orders   |

  @RTE-02
  Scenario: [7] A route has expired at the very end of its lifetime, and not a millisecond before
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name             | service_name | address                 | lifetime_s |
      | ToOrders         | Target       | TCP://sql2.example:4022 | 10         |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 9.999
    And a message is sent on dialog "D1"
    And time passes to second 10
    When a message is sent on dialog "D2"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D2" shows exactly:
      | event           | instance | database |
      | message arrived | sql1     | shop     |

  @RTE-02
  Scenario: [8] ALTER ROUTE without LIFETIME keeps the route's expiry; with LIFETIME it counts from the ALTER
    Given dialog "D2" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name             | service_name | address                 | lifetime_s |
      | ToOrders         | Target       | TCP://sql2.example:4022 | 10         |
      | Spare            | Clerk        | TCP://sql5.example:4022 | 10         |
      | AutoCreatedLocal |              | LOCAL                   |            |
    And time passes to second 5
    And in database "shop" of "sql1": ALTER ROUTE ToOrders WITH ADDRESS = 'LOCAL'
    And in database "shop" of "sql1": ALTER ROUTE Spare WITH SERVICE_NAME = 'Target', ADDRESS = 'TCP://sql2.example:4022', LIFETIME = 20
    And time passes to second 11
    # ToOrders expired at 10 as it was going to; Spare lasts until 25
    And a message is sent on dialog "D1"
    And time passes to second 24
    When a message is sent on dialog "D2"
    And time passes to second 35
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D2" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |

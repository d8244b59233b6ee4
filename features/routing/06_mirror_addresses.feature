@requires-mirroring @requires-routing
Feature: Routing 06 - Mirror addresses

  A route with a mirror address takes precedence only when a route is
  chosen; matching gives it no special attention. The first time such a
  route is used, a request goes to both addresses to learn which instance
  is the principal. Afterwards every message that uses the route goes to
  the principal without contacting the mirror. If the principal cannot be
  reached, or says it is no longer the principal, messages go to the other
  address once that instance says it is the new principal. If the partner
  does not claim to be the principal, nothing is sent to it; both addresses
  are tried again until the principal answers or the partner takes over.

  The database "ledger" is mirrored: sql3 holds the principal, sql4 the
  mirror. The route "Pair" in sql1's database "shop" names both.

  Background:
    Given the topology "routing"
    And dialog "L1" is begun from service "Initiator" to service "Ledger"
    And the routes in database "shop" of "sql1" are:
      | name | service_name | address                 | mirror_address          |
      | Pair | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |

  @RTR-2
  Scenario: [1] The first use of the route asks both addresses which is the principal
    When a message is sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "L1" shows exactly:
      | event               | instance | address                 | answer        | database |
      | principal probe     | sql1     | TCP://sql3.example:4022 | principal     | NULL     |
      | principal probe     | sql1     | TCP://sql4.example:4022 | not principal | NULL     |
      | message transmitted | sql1     | TCP://sql3.example:4022 | NULL          | NULL     |
      | message arrived     | sql3     | NULL                    | NULL          | ledger   |

  @RTR-2 @RTR-3
  Scenario: [2] Once the principal is known, later messages go to it without contacting the mirror
    Given a message is sent on dialog "L1"
    When 2 messages are sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "L1" shows exactly from second 0:
      | event               | message_sequence_number | address                 |
      | principal probe     | 0                       | TCP://sql3.example:4022 |
      | principal probe     | 0                       | TCP://sql4.example:4022 |
      | message transmitted | 0                       | TCP://sql3.example:4022 |
      | message transmitted | 1                       | TCP://sql3.example:4022 |
      | message transmitted | 2                       | TCP://sql3.example:4022 |

  @RTR-4
  Scenario: [3] After a failover the old principal says so, and messages follow the partner that claims the role
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And the copy of database "ledger" on "sql4" becomes the principal
    When a message is sent on dialog "L1"
    And time passes to second 20
    Then the log for dialog "L1" shows exactly from second 11:
      | event               | address                 | answer        | database |
      | principal lost      | TCP://sql3.example:4022 | not principal | NULL     |
      | message transmitted | TCP://sql4.example:4022 | NULL          | NULL     |
      | message arrived     | NULL                    | NULL          | ledger   |
    And the log for dialog "L1" at "sql4" has 1 "message arrived" event
    # the partner is asked; whether the old principal is asked again as well the documents do not say
    And the log for dialog "L1" has 1 "principal probe" event where answer is "principal" from second 11
    And the log for dialog "L1" has 1 "principal probe" event where address is "TCP://sql4.example:4022" from second 11

  @RTR-4
  Scenario: [4] When the principal cannot be reached and the partner has taken over, messages go to the partner
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And the copy of database "ledger" on "sql4" becomes the principal
    When a message is sent on dialog "L1"
    And time passes to second 20
    Then the log for dialog "L1" shows exactly from second 11:
      | event               | address                 | answer      |
      | principal lost      | TCP://sql3.example:4022 | unreachable |
      | message transmitted | TCP://sql4.example:4022 | NULL        |
    And the log for dialog "L1" has 1 "principal probe" event where answer is "principal" from second 11
    And the log for dialog "L1" has 1 "principal probe" event where address is "TCP://sql4.example:4022" from second 11

  @RTR-5
  Scenario: [5] When the principal cannot be reached and the partner does not claim the role, nothing goes to the partner
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And a message is sent on dialog "L1"
    When time passes to second 100
    Then the log for dialog "L1" has no "message transmitted" event from second 11
    And the log for dialog "L1" has no "message arrived" event from second 11
    And the log for dialog "L1" has no "principal probe" event where answer is "principal" from second 11

  @RTR-5
  Scenario: [6] Both addresses are tried again until the principal answers
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And a message is sent on dialog "L1"
    And time passes to second 50
    And instance "sql3" can be reached again
    When time passes to second {principal_retry_s} * 2 + 200
    Then the log for dialog "L1" at "sql3" has 2 "message arrived" events
    And the log for dialog "L1" has no "message transmitted" event where address is "TCP://sql4.example:4022"

  @RTR-5 @RTR-4
  Scenario: [7] Both addresses are tried again until the partner says it is now the principal
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And a message is sent on dialog "L1"
    And time passes to second 50
    And the copy of database "ledger" on "sql4" becomes the principal
    When time passes to second {principal_retry_s} * 2 + 200
    Then the log for dialog "L1" at "sql4" has 1 "message arrived" event
    And the log for dialog "L1" at "sql3" has 1 "message arrived" event

  @RTR-1 @RTC-1
  Scenario: [8] Matching gives a mirror address no special attention
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | mirror_address          |
      | ByName   | Ledger       | TCP://sql3.example:4022 |                         |
      | Wildcard |              | TCP://sql4.example:4022 | TCP://sql3.example:4022 |
    When a message is sent on dialog "L1"
    Then the log for dialog "L1" at "sql1" shows exactly:
      | event          | step  | routes | route  |
      | routes matched | RTM-2 | ByName | NULL   |
      | route chosen   | RTC-3 | NULL   | ByName |
    And the log for dialog "L1" has no "principal probe" event

  @RTR-3
  Scenario: [9] The principal one conversation learned serves another conversation using the route, without asking
    Given dialog "L2" is begun from service "Initiator" to service "Ledger"
    And a message is sent on dialog "L1"
    When a message is sent on dialog "L2"
    And time passes to second 10
    Then the log for dialog "L2" shows exactly:
      | event               | instance | address                 | database |
      | message transmitted | sql1     | TCP://sql3.example:4022 | NULL     |
      | message arrived     | sql3     | NULL                    | ledger   |
    And the log for dialog "L2" has no "principal probe" event

  @RTR-1 @RTM-1
  Scenario: [10] A route naming the conversation's broker instance is matched before a route with a mirror address
    Given dialog "L3" is begun from service "Initiator" to service "Ledger" on the broker instance of sql3.ledger
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | broker_instance | address                 | mirror_address          |
      | Pair  | Ledger       |                 | TCP://sql4.example:4022 | TCP://sql3.example:4022 |
      | Exact | Ledger       | sql3.ledger     | TCP://sql3.example:4022 |                         |
    When a message is sent on dialog "L3"
    And time passes to second 10
    Then the log for dialog "L3" at "sql1" shows exactly:
      | event               | address                 |
      | message transmitted | TCP://sql3.example:4022 |
    And the log for dialog "L3" has no "principal probe" event

  @RTR-2
  Scenario: [11] An instance without the broker instance the conversation names does not claim the role
    Given dialog "L3" is begun from service "Initiator" to service "Ledger" on the broker instance of sql3.ledger
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 | mirror_address          |
      | Other | Ledger       | TCP://sql2.example:4022 | TCP://sql3.example:4022 |
    When a message is sent on dialog "L3"
    And time passes to second 10
    Then the log for dialog "L3" at "sql1" shows exactly:
      | event               | address                 | answer        |
      | principal probe     | TCP://sql2.example:4022 | not principal |
      | principal probe     | TCP://sql3.example:4022 | principal     |
      | message transmitted | TCP://sql3.example:4022 | NULL          |

  @RTR-4
  Scenario: [12] A second failover, back to the first principal, is followed as well
    Given a message is sent on dialog "L1"
    And time passes to second 13
    And the copy of database "ledger" on "sql4" becomes the principal
    And a message is sent on dialog "L1"
    And time passes to second 23
    And the copy of database "ledger" on "sql3" becomes the principal
    When a message is sent on dialog "L1"
    And time passes to second 30
    Then the log for dialog "L1" shows exactly from second 21:
      | event               | address                 | answer        | database |
      | principal lost      | TCP://sql4.example:4022 | not principal | NULL     |
      | message transmitted | TCP://sql3.example:4022 | NULL          | NULL     |
      | message arrived     | NULL                    | NULL          | ledger   |
    And the log for dialog "L1" has 1 "principal probe" event where answer is "principal" from second 21
    And the log for dialog "L1" has 1 "principal probe" event where address is "TCP://sql3.example:4022" from second 21

  @RTR-2
  Scenario: [13] An instance does not claim the role for a broker instance it does not hold, whatever it holds beside
    # sql2 holds Target and sql3 holds broker instances that sort after sql1.stock's, but neither holds sql1.stock's
    Given dialog "T1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 | mirror_address          |
      | Other | Target       | TCP://sql2.example:4022 | TCP://sql3.example:4022 |
    When a message is sent on dialog "T1"
    And time passes to second 5
    Then the log for dialog "T1" at "sql1" shows first:
      | event           | address                 | answer        |
      | principal probe | TCP://sql2.example:4022 | not principal |
      | principal probe | TCP://sql3.example:4022 | not principal |
    And the log for dialog "T1" has no "message transmitted" event

  @RTR-4
  Scenario: [14] A failover changes the roles of the mirrored database's copies only
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | mirror_address          |
      | Pair     | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | ToOrders | Target       | TCP://sql2.example:4022 |                         |
    And the copy of database "ledger" on "sql4" becomes the principal
    When a message is sent on dialog "D1"
    And a message is sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "L1" shows exactly:
      | event           | instance | database |
      | message arrived | sql4     | ledger   |

  @RTR-4
  Scenario: [15] A failover leaves alone a database beside the mirror whose broker instance sorts after the pair's
    Given dialog "A1" is begun from service "Initiator" to service "Archive"
    And the routes in database "shop" of "sql1" are:
      | name      | service_name | address                 | mirror_address          |
      | Pair      | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | ToArchive | Archive      | TCP://sql4.example:4022 |                         |
    And the copy of database "ledger" on "sql4" becomes the principal
    When a message is sent on dialog "A1"
    And a message is sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "A1" shows exactly:
      | event           | instance | database |
      | message arrived | sql4     | archive  |
    And the log for dialog "L1" shows exactly:
      | event           | instance | database |
      | message arrived | sql4     | ledger   |


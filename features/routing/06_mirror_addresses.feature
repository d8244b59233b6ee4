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
    # neither holds sql1.stock's broker instance; sql3 holds one that sorts after it, and not the service either.
    # sql2 holds the service Target: the routing document does not say whether the request asks about the
    # conversation's broker instance or the route's service (a route that names no broker instance), so sql2 may
    # claim the role for Target's database, and the message then go there
    Given dialog "T1" is begun from service "Initiator" to service "Target" on the broker instance of sql1.stock
    And the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 | mirror_address          |
      | Other | Target       | TCP://sql2.example:4022 | TCP://sql3.example:4022 |
    When a message is sent on dialog "T1"
    And time passes to second 5
    Then the log for dialog "T1" at "sql1" shows first:
      | event           | address                 | answer                     |
      | principal probe | TCP://sql2.example:4022 | not principal or principal |
      | principal probe | TCP://sql3.example:4022 | not principal              |
    And the log for dialog "T1" has no "message transmitted" event where address is "TCP://sql3.example:4022"

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


  # A forwarder learns the principal as any broker does: the first time the route with a mirror address is used
  # (RTR-2), here after a failover made sql4's copy the principal, so the message goes to sql4 and never to sql3.
  # The message waits at sql5 for a route until msdb there gets one (RTM-7, RTM-8); it is matched again at its
  # time-out or at sql5's next 2nd notification, the new route naming its service (PER-2B).
  @RTR-2 @RTR-4 @RTM-8 @requires-forwarding @requires-periodic-tasks
  Scenario: [16] A message a forwarder holds for want of a route follows the principal the forwarder asks for after a failover
    Given the routes in database "shop" of "sql1" are:
      | name   | service_name | address                 |
      | ViaFwd | Ledger       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name   | service_name | address                 |
      | Other  | Elsewhere    | TCP://sql2.example:4022 |
    And a message is sent on dialog "L1"
    And time passes to second 11
    And the copy of database "ledger" on "sql4" becomes the principal
    And in msdb of "sql5": CREATE ROUTE Pair WITH SERVICE_NAME = 'Ledger', ADDRESS = 'TCP://sql3.example:4022', MIRROR_ADDRESS = 'TCP://sql4.example:4022'
    When time passes to second 40
    Then the log for dialog "L1" shows each once:
      | event             | instance | address                 | answer        | hops | database |
      | principal probe   | sql5     | TCP://sql3.example:4022 | not principal | NULL | NULL     |
      | principal probe   | sql5     | TCP://sql4.example:4022 | principal     | NULL | NULL     |
      | message forwarded | sql5     | TCP://sql4.example:4022 | NULL          | 1    | NULL     |
      | message arrived   | sql4     | NULL                    | NULL          | NULL | ledger   |
    And the log for dialog "L1" has no "message transmitted" event where address is "TCP://sql3.example:4022"
    And the log for dialog "L1" has no "forwarded message deleted" event

  # Matching gives the mirror address no special attention (RTR-1): once acknowledged, the conversation's messages
  # carry the target's broker instance (RTE-04), so a route created for it is matched at step 1, before the
  # mirrored route of step 2. Dropped again, the mirrored route takes the next message to the principal it has
  # known since it first delivered one, "sem contatar a instância espelho" (RTR-3): no one is asked again.
  @RTR-3 @RTR-1 @RTE-04 @RTM-1 @requires-forwarding
  Scenario: [17] While the principal is known, a route created for the acknowledged conversation is matched first, and once dropped the mirrored route sends to the principal without asking
    Given the routes in msdb of "sql5" are:
      | name     | service_name | address                 |
      | ToLedger | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "L1"
    And time passes to second 20
    And in database "shop" of "sql1": CREATE ROUTE Exact WITH SERVICE_NAME = 'Ledger', BROKER_INSTANCE = 'sql3.ledger', ADDRESS = 'TCP://sql5.example:4022'
    And a message is sent on dialog "L1"
    And time passes to second 50
    And in database "shop" of "sql1": DROP ROUTE Exact
    And a message is sent on dialog "L1"
    When time passes to second 80
    Then the log for dialog "L1" shows each once:
      | event               | instance | message_sequence_number | address                 | hops | database |
      | message transmitted | sql1     | 0                       | TCP://sql3.example:4022 | NULL | NULL     |
      | message arrived     | sql3     | 0                       | NULL                    | NULL | ledger   |
      | message transmitted | sql1     | 1                       | TCP://sql5.example:4022 | NULL | NULL     |
      | message forwarded   | sql5     | 1                       | TCP://sql3.example:4022 | 1    | NULL     |
      | message transmitted | sql5     | 1                       | TCP://sql3.example:4022 | NULL | NULL     |
      | message arrived     | sql3     | 1                       | NULL                    | NULL | ledger   |
      | message transmitted | sql1     | 2                       | TCP://sql3.example:4022 | NULL | NULL     |
      | message arrived     | sql3     | 2                       | NULL                    | NULL | ledger   |
    And the log for dialog "L1" has no "principal probe" event from second 1
    And the log for dialog "L1" has no "message transmitted" event where address is "TCP://sql4.example:4022"

  # Which address the principal stands at is what the probe learned (RTR-2, RTR-3), not which field of the route
  # names it: with the two addresses swapped, messages still go to the principal and never to the mirror. Whether
  # the altered route counts as one that has not yet delivered a message, and is asked about again, the documents
  # do not say: both addresses may be asked again.
  @RTR-3 @RTR-2
  Scenario: [18] A mirrored route whose two addresses are swapped while the principal is known still sends to the principal
    Given a message is sent on dialog "L1"
    And time passes to second 20
    And in database "shop" of "sql1": ALTER ROUTE Pair WITH ADDRESS = 'TCP://sql4.example:4022', MIRROR_ADDRESS = 'TCP://sql3.example:4022'
    And a message is sent on dialog "L1"
    When time passes to second 40
    Then the log for dialog "L1" at "sql1" shows each once:
      | event               | message_sequence_number | address                 |
      | message transmitted | 0                       | TCP://sql3.example:4022 |
      | message transmitted | 1                       | TCP://sql3.example:4022 |
    And the log for dialog "L1" at "sql3" has 2 "message arrived" events
    And the log for dialog "L1" at "sql4" has no "message arrived" event

  # RTR-5: "o Service Broker não envia mensagens ao parceiro" while the partner does not claim the role - a later
  # message of the conversation included - and the mirrored route is still the one chosen (RTC-1: "escolha uma rota
  # entre as rotas que especificam um endereço de espelho"): routes created or altered meanwhile to reach the
  # partner's address directly are never a way round it. Once the principal answers again, every message goes to it.
  @RTR-5 @RTC-1
  Scenario: [19] While no partner claims the role, a later message waits too, and routes created or altered to reach the partner directly are not chosen instead
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 | mirror_address          |
      | Pair  | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | Spare | Clerk        | TCP://sql4.example:4022 |                         |
    And a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And a message is sent on dialog "L1"
    And time passes to second 14
    And a message is sent on dialog "L1"
    And in database "shop" of "sql1": CREATE ROUTE Direct WITH SERVICE_NAME = 'Ledger', ADDRESS = 'TCP://sql4.example:4022'
    And in database "shop" of "sql1": ALTER ROUTE Spare WITH SERVICE_NAME = 'Ledger'
    And time passes to second 50
    And instance "sql3" can be reached again
    When time passes to second {principal_retry_s} * 2 + 200
    Then the log for dialog "L1" has no "message transmitted" event where address is "TCP://sql4.example:4022"
    And the log for dialog "L1" at "sql4" has no "message arrived" event
    And the log for dialog "L1" at "sql3" has 3 "message arrived" events

  # The mirrored route dropped while its message waits for a principal: the message no longer has that route, so
  # it is routed again (the transmitter takes up the change, PER-2B, or its next retry finds the route gone) and
  # takes the route left, through the forwarder, never the dropped pair's address, although sql3 answers again
  # from the instant of the drop on (RTE-03: routes are found, then one is chosen among them).
  @RTR-5 @RTC-3 @RTX-1 @requires-forwarding
  Scenario: [20] A mirrored route dropped while no partner claims the role: its waiting message takes the route left, never the dropped one
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 | mirror_address          |
      | Pair    | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | ViaFwd  | Ledger       | TCP://sql5.example:4022 |                         |
    And the routes in msdb of "sql5" are:
      | name     | service_name | address                 |
      | ToLedger | Ledger       | TCP://sql3.example:4022 |
    And a message is sent on dialog "L1"
    And time passes to second 13
    And instance "sql3" cannot be reached
    And a message is sent on dialog "L1"
    And time passes to second 14
    And in database "shop" of "sql1": DROP ROUTE Pair
    And instance "sql3" can be reached again
    When time passes to second {principal_retry_s} * 2 + 200
    Then the log for dialog "L1" shows each once from second 13:
      | event             | instance | message_sequence_number | hops | database |
      | message forwarded | sql5     | 1                       | 1    | NULL     |
      | message arrived   | sql3     | 1                       | NULL | ledger   |
    And the log for dialog "L1" at "sql1" has no "message transmitted" event where address is "TCP://sql3.example:4022" from second 13
    And the log for dialog "L1" has no "message transmitted" event where address is "TCP://sql4.example:4022"

  # A failover changes which copy of the mirrored database is the principal (RTR-4) and nothing else: a message of
  # another service waiting for its connection stays routed as it was, and goes there once it can.
  @RTR-4
  Scenario: [21] A failover while a message of another service waits for its connection leaves it where it was routed
    Given dialog "D1" is begun from service "Initiator" to service "Target"
    And the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | mirror_address          |
      | Pair     | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | ToOrders | Target       | TCP://sql2.example:4022 |                         |
    And a message is sent on dialog "L1"
    And instance "sql2" cannot be reached
    And a message is sent on dialog "D1"
    And time passes to second 13
    And the copy of database "ledger" on "sql4" becomes the principal
    And a message is sent on dialog "L1"
    And time passes to second 15
    And instance "sql2" can be reached again
    # sql1 connects to sql2 once its attempt of second 0 or 10 stops suppressing the address (PER-2A)
    When time passes to second 100
    Then the log for dialog "D1" at "sql1" shows each once:
      | event               | address                 |
      | message transmitted | TCP://sql2.example:4022 |
    And the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D1" has no "principal probe" event
    And the log for dialog "D1" has no "message dropped" event
    And the log for dialog "L1" at "sql4" has 1 "message arrived" event

  # "Se o Service Broker não entregou anteriormente uma mensagem usando a rota, ele envia uma solicitação para ambos
  # os endereços": the route is sql2's own, which has delivered nothing yet, though a route of sql1 of the same name
  # and addresses has; what sql1 learnt is sql1's
  @RTR-2
  Scenario: [22] Another instance's route of the same name and addresses asks both addresses at its own first use
    Given dialog "L2" is begun from service "orders.Target" to service "Ledger"
    And the routes in database "orders" of "sql2" are:
      | name | service_name | address                 | mirror_address          |
      | Pair | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
    And a message is sent on dialog "L1"
    And time passes to second 5
    When a message is sent on dialog "L2"
    And time passes to second 15
    Then the log for dialog "L2" shows exactly:
      | event               | instance | address                 | answer        | database |
      | principal probe     | sql2     | TCP://sql3.example:4022 | principal     | NULL     |
      | principal probe     | sql2     | TCP://sql4.example:4022 | not principal | NULL     |
      | message transmitted | sql2     | TCP://sql3.example:4022 | NULL          | NULL     |
      | message arrived     | sql3     | NULL                    | NULL          | ledger   |

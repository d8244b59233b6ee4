@requires-routing
Feature: Routing 03 - Choosing a route

  Among the matching routes, routes with the same broker instance, service
  name and network address count as identical. Service Broker then chooses
  among routes that specify a mirror address; then among LOCAL routes,
  unless this instance holds no service of the requested name; then among
  routes with a network address; last among TRANSPORT routes. When message
  forwarding is not active, a message whose conversation did not begin in
  this instance is dropped if the chosen route is not LOCAL. Which route of
  a step is chosen is left open: a scenario accepts any of them.

  Background:
    Given the topology "routing"
    And dialog "D1" is begun from service "Initiator" to service "Target"

  @RTC-0
  Scenario: [1] Identical routes count as one candidate
    Given the routes in database "shop" of "sql1" are:
      | name | service_name | address                 |
      | A    | Target       | TCP://sql2.example:4022 |
      | B    | Target       | TCP://sql2.example:4022 |
      | C    | Target       | TCP://sql5.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    # the documents do not say which member names a group of identical routes
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event        | step  | candidates     | route       |
      | route chosen | RTC-3 | A, C or B, C   | A or B or C |
    # a black box shows only that one of the two addresses is used: how often each is, is not specified
    And the log for dialog "D1" at "sql1" shows exactly:
      | event               | address                                            |
      | message transmitted | TCP://sql2.example:4022 or TCP://sql5.example:4022 |

  @RTC-1 @requires-mirroring
  Scenario: [2] A route with a mirror address is chosen before LOCAL, network and TRANSPORT routes
    Given dialog "L1" is begun from service "Initiator" to service "Ledger"
    And the routes in database "shop" of "sql1" are:
      | name      | service_name | address                 | mirror_address          |
      | Mirrored  | Ledger       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | Local     | Ledger       | LOCAL                   |                         |
      | Network   | Ledger       | TCP://sql5.example:4022 |                         |
      | Transport | Ledger       | TRANSPORT               |                         |
    When a message is sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "L1" shows exactly:
      | event           | instance | step  | route    | database |
      | route chosen    | sql1     | RTC-1 | Mirrored | NULL     |
      | route chosen    | sql3     | RTC-2 | AutoCreatedLocal | NULL |
      | message arrived | sql3     | NULL  | NULL     | ledger   |

  @RTC-2
  Scenario: [3] A LOCAL route is chosen before a network address when the instance holds the service
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Local   | Target       | LOCAL                   |
      | Network | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    Then the log for dialog "D1" shows exactly:
      | event           | instance | step  | route | database |
      | route chosen    | sql1     | RTC-2 | Local | NULL     |
      | message arrived | sql1     | NULL  | NULL  | shop     |

  @RTC-2 @RTC-3 @RTE-03
  Scenario: [4] LOCAL routes are passed over when this instance holds no such service
    Given dialog "L1" is begun from service "Initiator" to service "Ledger"
    And the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Local   | Ledger       | LOCAL                   |
      | Network | Ledger       | TCP://sql3.example:4022 |
    When a message is sent on dialog "L1"
    And time passes to second 10
    Then the log for dialog "L1" shows exactly:
      | event           | instance | step  | route   | database |
      | route chosen    | sql1     | RTC-3 | Network | NULL     |
      | route chosen    | sql3     | RTC-2 | AutoCreatedLocal | NULL |
      | message arrived | sql3     | NULL  | NULL    | ledger   |

  @RTC-3 @RTC-4
  Scenario: [5] A network address is chosen before TRANSPORT
    Given dialog "O1" is begun from service "Initiator" to service "TCP://sql2.example:4022/Orders"
    And the routes in database "shop" of "sql1" are:
      | name      | service_name                   | address                 |
      | Network   | TCP://sql2.example:4022/Orders | TCP://sql5.example:4022 |
      | Transport | TCP://sql2.example:4022/Orders | TRANSPORT               |
    When a message is sent on dialog "O1"
    And time passes to second 10
    Then the log for dialog "O1" at "sql1" shows first:
      | event        | step  | route   |
      | route chosen | RTC-3 | Network |
    # TRANSPORT would take sql2's address from the service name
    And the log for dialog "O1" at "sql1" shows first:
      | event               | address                 |
      | message transmitted | TCP://sql5.example:4022 |

  @RTC-4 @RTE-03
  Scenario: [6] TRANSPORT comes last and takes its address from the service name
    Given dialog "O1" is begun from service "Initiator" to service "TCP://sql2.example:4022/Orders"
    And the routes in database "shop" of "sql1" are:
      | name      | service_name                   | address   |
      | Local     | TCP://sql2.example:4022/Orders | LOCAL     |
      | Transport | TCP://sql2.example:4022/Orders | TRANSPORT |
    When a message is sent on dialog "O1"
    And time passes to second 10
    Then the log for dialog "O1" shows exactly:
      | event               | instance | step  | route     | address                 | database |
      | route chosen        | sql1     | RTC-4 | Transport | NULL                    | NULL     |
      | message transmitted | sql1     | NULL  | NULL      | TCP://sql2.example:4022 | NULL     |
      | route chosen        | sql2     | RTC-2 | AutoCreatedLocal | NULL             | NULL     |
      | message arrived     | sql2     | NULL  | NULL      | NULL                    | orders   |

  @RTC-5 @requires-forwarding
  Scenario: [7] With forwarding off, a message from outside is dropped when the chosen route is not LOCAL
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Via5    | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name | address                 |
      | To2     | Target       | TCP://sql2.example:4022 |
    And message forwarding is disabled on "sql5"
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows first:
      | event           | instance | route | rule  |
      | route chosen    | sql1     | Via5  | NULL  |
      | route chosen    | sql5     | To2   | NULL  |
      | message dropped | sql5     | NULL  | RTC-5 |
    And the log for dialog "D1" has no "message arrived" event

  @RTC-5 @requires-forwarding
  Scenario: [8] With forwarding on, the same message is forwarded and delivered
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Via5    | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name | address                 |
      | To2     | Target       | TCP://sql2.example:4022 |
    And message forwarding is enabled on "sql5"
    When a message is sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" shows each once:
      | event             | instance | hops | database |
      | message forwarded | sql5     | 1    | NULL     |
      | message arrived   | sql2     | NULL | orders   |

  @RTC-5
  Scenario: [9] With forwarding off, a message from outside still takes a LOCAL route
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | ToSql2  | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows exactly:
      | event           | instance | database |
      | message arrived | sql2     | orders   |
    And the log for dialog "D1" has no "message dropped" event

  @RTC-0
  Scenario: [10] Routes that differ in their network address only are two candidates
    Given the routes in database "shop" of "sql1" are:
      | name | service_name | address                 |
      | A    | Target       | TCP://sql2.example:4022 |
      | B    | Target       | TCP://sql5.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" at "sql1" shows exactly:
      | event        | step  | candidates | route  |
      | route chosen | RTC-3 | A, B       | A or B |
    And the log for dialog "D1" at "sql1" shows exactly:
      | event               | address                                            |
      | message transmitted | TCP://sql2.example:4022 or TCP://sql5.example:4022 |

  # The LOCAL route could have won here (sql1 holds Target), and still the mirrored route comes first.
  @RTC-1 @RTC-2 @requires-mirroring
  Scenario: [11] A route with a mirror address is chosen before a LOCAL route even where this instance holds the service
    Given the routes in database "shop" of "sql1" are:
      | name     | service_name | address                 | mirror_address          |
      | Mirrored | Target       | TCP://sql3.example:4022 | TCP://sql4.example:4022 |
      | Local    | Target       | LOCAL                   |                         |
    When a message is sent on dialog "D1"
    And time passes to second 10
    # no partner claims to be principal for Target, so the message waits and is routed again: the first choice
    Then the log for dialog "D1" at "sql1" shows first:
      | event        | step  | route    |
      | route chosen | RTC-1 | Mirrored |
    And the log for dialog "D1" at "sql1" has at least 1 "principal probe" event
    And the log for dialog "D1" at "sql1" has no "message arrived" event

  # RTC-5 is decided where the route is chosen, with forwarding as it is then: "Se o encaminhamento do agente não
  # estiver ativo, o Service Broker descartará a mensagem se a conversação não teve origem na instância atual e se
  # o endereço da rota escolhida não for 'LOCAL'". A message that reaches the forwarder only after its forwarding
  # was switched off is dropped there, however it was when the message was sent.
  @RTC-5 @requires-forwarding
  Scenario: [12] Forwarding switched off while a message waits to reach the forwarder: it is dropped there when it comes
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Via5    | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name | address                 |
      | To2     | Target       | TCP://sql2.example:4022 |
    And instance "sql5" cannot be reached
    And a message is sent on dialog "D1"
    And time passes to second 1
    And message forwarding is disabled on "sql5"
    And instance "sql5" can be reached again
    # sql1 connects to sql5 once its attempt of second 0 or 10 stops suppressing the address (PER-2A)
    When time passes to second 100
    Then the log for dialog "D1" shows first:
      | event           | instance | rule  |
      | message dropped | sql5     | RTC-5 |
    And the log for dialog "D1" has no "message forwarded" event
    And the log for dialog "D1" has no "message arrived" event

  # The same at a forwarder that holds the message delayed for want of a route (RTM-7 there is no error, and no
  # route is chosen, so nothing is dropped yet): forwarding switched off meanwhile, the route it then finds is not
  # LOCAL and the message is dropped. It is matched again at its time-out or at the forwarder's next 2nd
  # notification, the new route naming its service (PER-2B), well within the 60 seconds the forwarder keeps it.
  @RTC-5 @RTM-8 @requires-forwarding @requires-periodic-tasks
  Scenario: [13] Forwarding switched off while the forwarder holds a message with no route: it is dropped once a route is found
    Given the routes in database "shop" of "sql1" are:
      | name    | service_name | address                 |
      | Via5    | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name    | service_name | address                 |
      | Other   | Elsewhere    | TCP://sql2.example:4022 |
    And a message is sent on dialog "D1"
    And time passes to second 11
    And message forwarding is disabled on "sql5"
    And in msdb of "sql5": CREATE ROUTE To2 WITH SERVICE_NAME = 'Target', ADDRESS = 'TCP://sql2.example:4022'
    When time passes to second 30
    Then the log for dialog "D1" at "sql5" has at least 1 "conversation delayed" event until second 11
    And the log for dialog "D1" shows first:
      | event           | instance | rule  |
      | message dropped | sql5     | RTC-5 |
    And the log for dialog "D1" has no "message dropped" event until second 11
    And the log for dialog "D1" has no "message forwarded" event
    And the log for dialog "D1" has no "message arrived" event

  # "Descartará a mensagem se a conversação não teve origem na instância atual e se o endereço da rota escolhida não
  # for 'LOCAL'": a TRANSPORT route's address is not LOCAL either, so with forwarding off the message from outside
  # that it would carry on is dropped as one a network address would carry
  @RTC-5 @requires-forwarding
  Scenario: [14] With forwarding off, a message from outside is dropped when the chosen route is TRANSPORT
    Given dialog "O1" is begun from service "Initiator" to service "TCP://sql2.example:4022/Orders"
    And the routes in database "shop" of "sql1" are:
      | name | service_name                   | address                 |
      | Via5 | TCP://sql2.example:4022/Orders | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name      | address   |
      | Transport | TRANSPORT |
    And message forwarding is disabled on "sql5"
    When a message is sent on dialog "O1"
    And time passes to second 10
    Then the log for dialog "O1" shows first:
      | event           | instance | rule  |
      | message dropped | sql5     | RTC-5 |
    And the log for dialog "O1" has no "message forwarded" event
    And the log for dialog "O1" has no "message arrived" event

@requires-forwarding @requires-routing
Feature: Routing 05 - Routing loops

  Message forwarding counts how many times a message has been forwarded,
  so a routing loop cannot forward it for ever; the limit is the profile's
  forward_hop_limit. When the matching route's network address resolves to
  the current instance, the conversation is treated as arriving from
  outside: it is routed with msdb.sys.routes, so forwarding must be active
  to send it to any address other than LOCAL.

  Background:
    Given the topology "routing"
    And dialog "D1" is begun from service "Initiator" to service "Target"

  @RTX-1
  Scenario: [1] A message going round a loop is dropped once it has been forwarded as often as the limit allows
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Via5  | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    And the routes in msdb of "sql2" are:
      | name  | service_name | address                 |
      | To5   | Target       | TCP://sql5.example:4022 |
    And message forwarding is enabled on "sql2"
    When a message is sent on dialog "D1"
    And time passes to second 30
    # a copy the broker sends again goes round again: each is forwarded as far as the limit, and no further
    Then the log for dialog "D1" has at least 1 "message forwarded" event where hops is "{forward_hop_limit}"
    And the log for dialog "D1" has no "message forwarded" event where hops is "{forward_hop_limit} + 1"
    And the log for dialog "D1" shows first:
      | event           | rule  |
      | message dropped | RTX-1 |
    And the log for dialog "D1" has no "message arrived" event

  @RTX-1
  Scenario: [2] A message forwarded fewer times than the limit is delivered
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Via5  | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" shows each once:
      | event             | instance | hops | database |
      | message forwarded | sql5     | 1    | NULL     |
      | message arrived   | sql2     | NULL | orders   |

  @RTX-2
  Scenario: [3] A route to this instance's own address makes the conversation arrive from outside
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Self  | Target       | TCP://sql1.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    # the document treats the conversation as if it came from outside: whether the message goes out over the
    # network and back, or is taken up at once, it does not say
    Then the log for dialog "D1" shows exactly:
      | event               | instance | table           | database               |
      | routes matched      | sql1     | shop.sys.routes | NULL                   |
      | routes matched      | sql1     | msdb.sys.routes | NULL                   |
      | message arrived     | sql1     | NULL            | shop or stock or audit |

  @RTX-2 @RTC-5
  Scenario: [4] Once it arrives from itself, forwarding must be active to send it elsewhere
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Self  | Target       | TCP://sql1.example:4022 |
    And the routes in msdb of "sql1" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    When a message is sent on dialog "D1"
    And time passes to second 10
    Then the log for dialog "D1" shows first:
      | event           | instance | table           | rule  |
      | routes matched  | sql1     | shop.sys.routes | NULL  |
      | routes matched  | sql1     | msdb.sys.routes | NULL  |
      | message dropped | sql1     | NULL            | RTC-5 |

  @RTX-2
  Scenario: [5] With forwarding active it is forwarded from there
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Self  | Target       | TCP://sql1.example:4022 |
    And the routes in msdb of "sql1" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    And message forwarding is enabled on "sql1"
    When a message is sent on dialog "D1"
    And time passes to second 20
    Then the log for dialog "D1" shows each once:
      | event             | instance | hops | database |
      | message forwarded | sql1     | 1    | NULL     |
      | message arrived   | sql2     | NULL | orders   |

  # "controla o número de vezes que uma mensagem foi encaminhada" (routing document, Routing loops): the count is
  # the message's, carried from one forwarder to the next, not each forwarder's own. Round a loop through two
  # forwarders sql2 only ever gets a message sql5 has forwarded already, and sql5 gets back one sql2 forwarded
  # after it, so neither forwards with a count it could have reached alone, whatever the limit
  @RTX-1
  Scenario: [6] Round a loop through two forwarders the count goes on from one forwarder to the other
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Via5  | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    And the routes in msdb of "sql2" are:
      | name  | service_name | address                 |
      | To5   | Target       | TCP://sql5.example:4022 |
    And message forwarding is enabled on "sql2"
    When a message is sent on dialog "D1"
    And time passes to second 30
    Then the log for dialog "D1" at "sql5" has at least 1 "message forwarded" event where hops is "1"
    And the log for dialog "D1" at "sql2" has no "message forwarded" event where hops is "1"
    And the log for dialog "D1" at "sql5" has no "message forwarded" event where hops is "2"
    And the log for dialog "D1" has no "message arrived" event

  # The count is each message's ("o número de vezes que uma mensagem foi encaminhada"), not its conversation's:
  # a second message sent while the forwarder holds the first is forwarded once as well. Whether sql1 holds the
  # second until the first goes on, or sends it on to wait behind it at sql5, the documents do not say; both
  # reach sql2 once sql5 may connect again (PER-2A: at the 2nd notification at 70, after its attempt at 3 or 10).
  @RTX-1
  Scenario: [7] Two messages the forwarder holds while their address cannot be reached go on with a count of one each
    Given the routes in database "shop" of "sql1" are:
      | name  | service_name | address                 |
      | Via5  | Target       | TCP://sql5.example:4022 |
    And the routes in msdb of "sql5" are:
      | name  | service_name | address                 |
      | To2   | Target       | TCP://sql2.example:4022 |
    And instance "sql2" cannot be reached
    And time passes to second 3
    And a message is sent on dialog "D1"
    And time passes to second 5
    And a message is sent on dialog "D1"
    And time passes to second 15
    And instance "sql2" can be reached again
    When time passes to second 100
    Then the log for dialog "D1" shows each once:
      | event             | instance | message_sequence_number | hops | database |
      | message forwarded | sql5     | 0                       | 1    | NULL     |
      | message forwarded | sql5     | 1                       | 1    | NULL     |
      | message arrived   | sql2     | 0                       | NULL | orders   |
      | message arrived   | sql2     | 1                       | NULL | orders   |
    And the log for dialog "D1" has no "message forwarded" event where hops is "2"
    And the log for dialog "D1" has no "message dropped" event
